//! The invite-mailbox driver (`itsme_mailbox_session`), docs/PROTOCOL.md
//! section 16.5.

use super::*;

/// What to ask the relay next ([`MailboxSession::next_request`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MailboxRequest {
    /// `POST` the path, no token: the relay answers 201 with the inviter's token.
    Create {
        /// The path to append to the relay's base URL.
        path: String,
    },
    /// `POST` the path, no token: 200 with the invitee's token.
    Accept {
        /// The path to append to the relay's base URL.
        path: String,
    },
    /// `POST` the body to the path, with the token: 201.
    Post {
        /// The path to append to the relay's base URL.
        path: String,
        /// The message to post.
        body: Vec<u8>,
    },
    /// `GET` the path, with the token, allowing `wait` seconds more: 200.
    Fetch {
        /// The path and query to append to the relay's base URL.
        path: String,
        /// How long the relay may hold the request, in seconds.
        wait: u32,
    },
    /// `DELETE` the path, with the token: 204 (404 is as good).
    Delete {
        /// The path to append to the relay's base URL.
        path: String,
    },
    /// Nothing more in this step: [`MailboxSession::begin`] another later.
    Idle,
    /// Nothing more to do on the relay, ever.
    Done,
}

/// The HTTP request to make for the pending [`MailboxRequest`]
/// ([`MailboxSession::http_request`]), as the library writes it: the
/// binding restates no method, path or header of the relay's.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// `POST`, `GET` or `DELETE`.
    pub method: String,
    /// The path (with its query) to append to the relay's base URL.
    pub path: String,
    /// The headers, in order, as name and value: the answer taken, the
    /// relay token's `Authorization` where the request takes one, the type
    /// of a POST's message. They hold the token: never log them.
    pub headers: Vec<(String, String)>,
    /// The message of a POST; empty for the others.
    pub body: Vec<u8>,
}

impl fmt::Debug for HttpRequest {
    /// The method, the path and the header names: never a header's value
    /// (the token).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("headers", &names)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// What an answer means beyond the exchange's state
/// ([`MailboxSession::answer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MailboxOutcome {
    /// Go on: ask for the next request.
    Proceed,
    /// The invite is gone (the other side ended it, or it expired); the
    /// exchange was rejected if still pending: start a new one.
    InviteEnded,
    /// The invite ID is taken (inviter) or someone else accepted the invite
    /// (invitee); the exchange was rejected if still pending.
    Conflict,
    /// The relay refused the request or did not answer (busy,
    /// rate-limiting, unreachable): the step ended and nothing changed;
    /// begin another later.
    StepEnded,
}

/// Carries an invite exchange ([`Exchange::invite`] or
/// [`Exchange::accept_invite`], not real-time) through the relay's invite
/// mailbox (`itsme_mailbox_session`): the library says which HTTP request
/// to make and takes the relay's answer; the host moves the bytes.
///
/// A step: [`MailboxSession::begin`], then [`MailboxSession::next_request`]
/// until [`MailboxRequest::Idle`] or [`MailboxRequest::Done`], making each
/// request as [`MailboxSession::http_request`] writes it (method, path,
/// headers, body) and giving its HTTP status and body to
/// [`MailboxSession::answer`] (status 0 when no answer came).  Once the SAS
/// is ready, confirm or reject the exchange as usual; the next steps carry
/// the decisions, then [`Exchange::settle`].  A message the exchange
/// refuses fails `answer` with the exchange's error; the next request ends
/// the invite (make it).  Save [`MailboxSession::save`] with the sealed
/// exchange after every step and [`MailboxSession::resume`] later: the
/// JSON is the one the Python binding and the relay client write.  The
/// saved state and [`MailboxSession::token`] hold the relay token: keep
/// them private.
///
/// The library keeps the exchange alive and runs each call under its
/// identity's lock.  Calls on one session are serialised.
pub struct MailboxSession {
    raw: NonNull<sys::itsme_mailbox_session>,
    lock: Mutex<()>,
}

// SAFETY: the header forbids using an itsme_mailbox_session from two
// threads at once, and every call this type makes on its handle is
// serialised by `lock`; the handle is tied to no thread.
unsafe impl Send for MailboxSession {}
// SAFETY: see above.
unsafe impl Sync for MailboxSession {}

impl MailboxSession {
    /// A new session for `exchange`, an invite exchange
    /// ([`ErrorKind::InvalidArgument`] otherwise).
    pub fn new(exchange: &Exchange) -> Result<MailboxSession> {
        init()?;
        let mut out = ptr::null_mut();
        // SAFETY: live exchange handle; out is a valid place.
        exchange.call(|raw| code_result(unsafe { sys::itsme_mailbox_session_new(raw, &mut out) }))?;
        Self::constructed(out)
    }

    /// A session resumed from `saved` (the JSON of [`MailboxSession::save`],
    /// of the Python binding or of the relay client) with `exchange`
    /// restored from the seal saved at the same time.
    /// [`ErrorKind::InvalidArgument`] for a state of another exchange, of
    /// an unknown version, or malformed.
    pub fn resume(exchange: &Exchange, saved: &str) -> Result<MailboxSession> {
        init()?;
        let text = CText::arg(saved, "saved")?;
        let mut out = ptr::null_mut();
        // SAFETY: live exchange handle; a NUL-terminated text; out is a valid place.
        exchange.call(|raw| code_result(unsafe { sys::itsme_mailbox_session_resume(raw, text.as_ptr(), &mut out) }))?;
        Self::constructed(out)
    }

    fn constructed(out: *mut sys::itsme_mailbox_session) -> Result<MailboxSession> {
        NonNull::new(out)
            .map(|raw| MailboxSession { raw, lock: Mutex::new(()) })
            .ok_or_else(|| Error::internal("itsme_mailbox_session_new succeeded without a handle"))
    }

    fn call<T>(
        &self,
        body: impl FnOnce(*mut sys::itsme_mailbox_session) -> std::result::Result<T, Failure>,
    ) -> Result<T> {
        locked_call(&self.lock, self.raw.as_ptr(), body)
    }

    /// Starts a step; its fetch may be held `wait` seconds (0 to 30).
    pub fn begin(&mut self, wait: u32) -> Result<()> {
        // SAFETY: live handle.
        self.call(|raw| code_result(unsafe { sys::itsme_mailbox_session_begin(raw, wait) }))
    }

    /// The request to make next; asking again before answering gives the
    /// same request.
    pub fn next_request(&mut self) -> Result<MailboxRequest> {
        self.call(|raw| {
            let mut request: sys::itsme_mailbox_request = 0;
            // SAFETY: live handle; the output is a valid place.
            code_result(unsafe { sys::itsme_mailbox_session_next_request(raw, &mut request) })?;
            let path = || {
                read_string(128, |out, cap, len| {
                    // SAFETY: live handle; out valid for cap bytes.
                    unsafe { sys::itsme_mailbox_session_request_path(raw, out, cap, len) }
                })
            };
            Ok(match request {
                sys::ITSME_MAILBOX_REQUEST_CREATE => MailboxRequest::Create { path: path()? },
                sys::ITSME_MAILBOX_REQUEST_ACCEPT => MailboxRequest::Accept { path: path()? },
                sys::ITSME_MAILBOX_REQUEST_POST => {
                    let body = read_bytes(sys::ITSME_REMOTE_MESSAGE_MAX, |out, cap, len| {
                        // SAFETY: live handle; out valid for cap bytes.
                        unsafe { sys::itsme_mailbox_session_request_body(raw, out, cap, len) }
                    })?;
                    MailboxRequest::Post { path: path()?, body }
                }
                sys::ITSME_MAILBOX_REQUEST_FETCH => {
                    let path = path()?;
                    let wait = path.rsplit("wait=").next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    MailboxRequest::Fetch { path, wait }
                }
                sys::ITSME_MAILBOX_REQUEST_DELETE => MailboxRequest::Delete { path: path()? },
                sys::ITSME_MAILBOX_REQUEST_IDLE => MailboxRequest::Idle,
                sys::ITSME_MAILBOX_REQUEST_DONE => MailboxRequest::Done,
                other => {
                    return Err(Failure::Binding(Error::internal(format!(
                        "libitsme returned mailbox request {other}, unknown to this binding"
                    ))))
                }
            })
        })
    }

    /// The HTTP request to make for the pending request (after
    /// [`MailboxSession::next_request`] gave one other than `Idle` or
    /// `Done`): its method, path, headers and body, as the library writes
    /// them.
    ///
    /// Errors: [`ErrorKind::InvalidState`] (no request pending).
    pub fn http_request(&self) -> Result<HttpRequest> {
        self.call(|raw| {
            let method = read_string(16, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_mailbox_session_request_method(raw, out, cap, len) }
            })?;
            let path = read_string(128, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_mailbox_session_request_path(raw, out, cap, len) }
            })?;
            let headers = read_string(512, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_mailbox_session_request_headers(raw, out, cap, len) }
            })?;
            let body = read_bytes(sys::ITSME_REMOTE_MESSAGE_MAX, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_mailbox_session_request_body(raw, out, cap, len) }
            })?;
            let headers = headers
                .split("\r\n")
                .filter(|line| !line.is_empty())
                .map(|line| match line.split_once(": ") {
                    Some((name, value)) => Ok((name.to_string(), value.to_string())),
                    None => Err(Failure::Binding(Error::internal("libitsme wrote a header line without \": \""))),
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(HttpRequest { method, path, headers, body })
        })
    }

    /// This side's relay token, once the invite was created or accepted
    /// (`None` before): the `Authorization: Bearer` value.
    pub fn token(&self) -> Result<Option<String>> {
        let result = self.call(|raw| {
            read_string(44, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_mailbox_session_token(raw, out, cap, len) }
            })
        });
        match result {
            Ok(token) => Ok(Some(token)),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Takes the relay's answer to the pending request: its HTTP `status`
    /// (0 when none came) and `body`; `now` is passed to the exchange. A
    /// refusal or no answer ends the step with nothing changed
    /// ([`MailboxOutcome::StepEnded`]).
    ///
    /// Errors: [`ErrorKind::InvalidState`] (no request pending),
    /// [`ErrorKind::MalformedMessage`] (a success whose body is not the
    /// route's JSON: the step ends, nothing changed), and the exchange's
    /// errors for a message it refused (the exchange has failed; the next
    /// request ends the invite).
    pub fn answer(&mut self, status: u16, body: &[u8], now: i64) -> Result<MailboxOutcome> {
        let mut outcome: sys::itsme_mailbox_outcome = 0;
        // SAFETY: live handle; body valid for its length; the output is a valid place.
        self.call(|raw| {
            code_result(unsafe {
                sys::itsme_mailbox_session_answer(raw, u32::from(status), body.as_ptr(), body.len(), now, &mut outcome)
            })
        })?;
        match outcome {
            sys::ITSME_MAILBOX_OUTCOME_PROCEED => Ok(MailboxOutcome::Proceed),
            sys::ITSME_MAILBOX_OUTCOME_INVITE_ENDED => Ok(MailboxOutcome::InviteEnded),
            sys::ITSME_MAILBOX_OUTCOME_CONFLICT => Ok(MailboxOutcome::Conflict),
            sys::ITSME_MAILBOX_OUTCOME_STEP_ENDED => Ok(MailboxOutcome::StepEnded),
            other => Err(Error::internal(format!("libitsme returned mailbox outcome {other}, unknown to this binding"))),
        }
    }

    /// Asks to end the invite on the relay: the next request is a delete
    /// (none without a token), then [`MailboxRequest::Done`].
    pub fn finish(&mut self) -> Result<()> {
        // SAFETY: live handle.
        self.call(|raw| code_result(unsafe { sys::itsme_mailbox_session_finish(raw, false) }))
    }

    /// Gives up: drops the messages not yet posted and ends the invite as
    /// [`MailboxSession::finish`], the session being done after the delete
    /// whatever the relay answered; reject the exchange yourself.
    pub fn cancel(&mut self) -> Result<()> {
        // SAFETY: live handle.
        self.call(|raw| code_result(unsafe { sys::itsme_mailbox_session_finish(raw, true) }))
    }

    /// The state to save (JSON) with the sealed exchange after every step.
    pub fn save(&mut self) -> Result<String> {
        self.call(|raw| {
            read_string(512, |out, cap, len| {
                // SAFETY: live handle; out valid for cap bytes.
                unsafe { sys::itsme_mailbox_session_save(raw, out, cap, len) }
            })
        })
    }
}

impl Drop for MailboxSession {
    fn drop(&mut self) {
        // SAFETY: the handle is live and released exactly once.
        unsafe { sys::itsme_mailbox_session_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for MailboxSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the token.
        f.debug_struct("MailboxSession").finish_non_exhaustive()
    }
}
