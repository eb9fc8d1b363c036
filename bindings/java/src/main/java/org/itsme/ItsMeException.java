package org.itsme;

import org.itsme.raw.ItsMeLibrary;
import org.itsme.raw.ItsMeLibrary.Result;

/**
 * A libitsme call failed: one subclass per result code of include/itsme.h
 * ({@link ItsMeLibrary.Result}), so callers catch what they handle, e.g.
 * {@code catch (ItsMeException.WrongPin e)}. A code this version does not
 * know (a newer library) gives this base class itself.
 */
public class ItsMeException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int code;
    private final String detail;

    ItsMeException(int code, String detail) {
        super(message(code, detail));
        this.code = code;
        this.detail = detail == null ? "" : detail;
    }

    private static String message(int code, String detail) {
        String text = ItsMe.resultMessage(code);
        return detail == null || detail.isEmpty() ? text : text + " (" + detail + ")";
    }

    /** The result code, as in the header. */
    public int code() {
        return code;
    }

    /** The result code as a member, or null for a code this version does not know. */
    public Result result() {
        return Result.of(code);
    }

    /** The detail the library recorded for this failure (may be empty); never holds secrets. */
    public String detail() {
        return detail;
    }

    /** The exception for a non-zero result code. */
    static ItsMeException of(int code, String detail) {
        Result result = Result.of(code);
        if (result == null) {
            return new ItsMeException(code, detail);
        }
        switch (result) {
            case E_INVALID_ARGUMENT: return new InvalidArgument(code, detail);
            case E_BUFFER_TOO_SMALL: return new BufferTooSmall(code, detail);
            case E_NOT_INITIALIZED: return new NotInitialized(code, detail);
            case E_UNSUPPORTED_PLATFORM: return new UnsupportedPlatform(code, detail);
            case E_NOT_FOUND: return new NotFound(code, detail);
            case E_ALREADY_EXISTS: return new AlreadyExists(code, detail);
            case E_INVALID_PIN: return new InvalidPin(code, detail);
            case E_WRONG_PIN: return new WrongPin(code, detail);
            case E_LOCKED: return new Locked(code, detail);
            case E_SECRET_STORE: return new SecretStoreFailed(code, detail);
            case E_CORRUPT_DATA: return new CorruptData(code, detail);
            case E_AUTHENTICATION_FAILED: return new AuthenticationFailed(code, detail);
            case E_INVALID_KEY: return new InvalidKey(code, detail);
            case E_INVALID_STATE: return new InvalidState(code, detail);
            case E_DATABASE: return new Database(code, detail);
            case E_OUT_OF_MEMORY: return new OutOfMemory(code, detail);
            case E_INTERNAL: return new Internal(code, detail);
            case E_WRONG_IDENTITY: return new WrongIdentity(code, detail);
            case E_WINDOW_USED: return new WindowUsed(code, detail);
            case E_MALFORMED_MESSAGE: return new MalformedMessage(code, detail);
            case E_EXPIRED: return new Expired(code, detail);
            case E_REPLAYED: return new Replayed(code, detail);
            case E_ROLLED_BACK: return new RolledBack(code, detail);
            default: return new ItsMeException(code, detail);
        }
    }

    /** The binding's own failure of the library's contract (ITSME_E_INTERNAL). */
    static ItsMeException internal(String detail) {
        return of(ItsMeLibrary.ITSME_E_INTERNAL, detail);
    }

    /** ITSME_E_INVALID_ARGUMENT: NULL, a value out of range, invalid UTF-8 (also raised by the binding). */
    public static class InvalidArgument extends ItsMeException {
        private static final long serialVersionUID = 1L;
        InvalidArgument(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_BUFFER_TOO_SMALL (the binding grows its buffers: seen only if the library misbehaves). */
    public static class BufferTooSmall extends ItsMeException {
        private static final long serialVersionUID = 1L;
        BufferTooSmall(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_NOT_INITIALIZED (the binding initialises the library when it loads it). */
    public static class NotInitialized extends ItsMeException {
        private static final long serialVersionUID = 1L;
        NotInitialized(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_UNSUPPORTED_PLATFORM: this CPU lacks AES-256-GCM in hardware. */
    public static class UnsupportedPlatform extends ItsMeException {
        private static final long serialVersionUID = 1L;
        UnsupportedPlatform(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_NOT_FOUND: no such identity, contact, secret or PIN. */
    public static class NotFound extends ItsMeException {
        private static final long serialVersionUID = 1L;
        NotFound(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_ALREADY_EXISTS: the identity or PIN to create exists already. */
    public static class AlreadyExists extends ItsMeException {
        private static final long serialVersionUID = 1L;
        AlreadyExists(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_INVALID_PIN: not exactly six ASCII digits (not counted as an attempt). */
    public static class InvalidPin extends ItsMeException {
        private static final long serialVersionUID = 1L;
        InvalidPin(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_WRONG_PIN: a well-formed PIN that does not match (counted). */
    public static class WrongPin extends ItsMeException {
        private static final long serialVersionUID = 1L;
        WrongPin(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_LOCKED: too many failed attempts; see {@link Identity#pinStatus}. */
    public static class Locked extends ItsMeException {
        private static final long serialVersionUID = 1L;
        Locked(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_SECRET_STORE: the secret store (or a host callback) failed. */
    public static class SecretStoreFailed extends ItsMeException {
        private static final long serialVersionUID = 1L;
        SecretStoreFailed(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_CORRUPT_DATA: stored data malformed, truncated or of an unknown version. */
    public static class CorruptData extends ItsMeException {
        private static final long serialVersionUID = 1L;
        CorruptData(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_AUTHENTICATION_FAILED: a tag, signature or commitment did not verify. */
    public static class AuthenticationFailed extends ItsMeException {
        private static final long serialVersionUID = 1L;
        AuthenticationFailed(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_INVALID_KEY: a public key was rejected. */
    public static class InvalidKey extends ItsMeException {
        private static final long serialVersionUID = 1L;
        InvalidKey(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_INVALID_STATE: a call the object's state does not allow. */
    public static class InvalidState extends ItsMeException {
        private static final long serialVersionUID = 1L;
        InvalidState(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_DATABASE: SQLite failed, or the file is not a contact store. */
    public static class Database extends ItsMeException {
        private static final long serialVersionUID = 1L;
        Database(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_OUT_OF_MEMORY. */
    public static class OutOfMemory extends ItsMeException {
        private static final long serialVersionUID = 1L;
        OutOfMemory(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_INTERNAL: a bug in the library (or the library broke its contract). */
    public static class Internal extends ItsMeException {
        private static final long serialVersionUID = 1L;
        Internal(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_WRONG_IDENTITY: the contact store belongs to another identity; nothing changed. */
    public static class WrongIdentity extends ItsMeException {
        private static final long serialVersionUID = 1L;
        WrongIdentity(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_WINDOW_USED: the window is not after the last one used for the contact. */
    public static class WindowUsed extends ItsMeException {
        private static final long serialVersionUID = 1L;
        WindowUsed(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_MALFORMED_MESSAGE: a peer message is malformed or out of order; the exchange failed. */
    public static class MalformedMessage extends ItsMeException {
        private static final long serialVersionUID = 1L;
        MalformedMessage(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_EXPIRED: too late; the exchange or session has failed. */
    public static class Expired extends ItsMeException {
        private static final long serialVersionUID = 1L;
        Expired(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_REPLAYED: a single-use message was presented again. */
    public static class Replayed extends ItsMeException {
        private static final long serialVersionUID = 1L;
        Replayed(int code, String detail) { super(code, detail); }
    }

    /** ITSME_E_ROLLED_BACK: the contact store is behind the last commit this device saw. */
    public static class RolledBack extends ItsMeException {
        private static final long serialVersionUID = 1L;
        RolledBack(int code, String detail) { super(code, detail); }
    }
}
