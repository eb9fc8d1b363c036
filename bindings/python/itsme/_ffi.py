"""Raw ctypes declarations of libitsme's C interface (include/itsme.h).

Nothing here is safe to call carelessly: these are the C functions as they
are, with the header's ownership and buffer rules.  The safe API lives in the
package itself.

Type rules, applied to every function of the header:

* ``itsme_result`` / ``int32_t`` -> ``c_int32``; ``uint32_t``,
  ``itsme_accessibility``, ``itsme_verification_state``,
  ``itsme_exchange_method``, ``itsme_exchange_state``, ``itsme_voice_state``,
  ``itsme_voice_outcome``, ``itsme_online_verify_state``,
  ``itsme_pin_update_state``, ``itsme_transfer_state`` and
  ``itsme_approval_decision`` -> ``c_uint32``;
  ``int64_t`` -> ``c_int64``; ``uint64_t`` -> ``c_uint64``; ``size_t`` ->
  ``c_size_t``; ``int`` -> ``c_int``.
* ``char *`` and ``const char *`` (text, in or out) -> ``c_char_p``.
* ``uint8_t *`` and ``const uint8_t *`` (bytes, in or out) -> ``POINTER(c_uint8)``.
* Handles (``itsme_secret_store *``, ``itsme_identity *``, ``itsme_store *``,
  ``itsme_contact *``, ``itsme_contact_list *``, ``itsme_random *``,
  ``itsme_exchange *``, ``itsme_voice *``, ``itsme_online_verify *``,
  ``itsme_pin_update *``, ``itsme_import *``, ``itsme_transfer *``,
  ``itsme_profile *``, ``itsme_replay_store *``, const or not) -> ``c_void_p``;
  a handle out-parameter (``T **``) -> ``POINTER(c_void_p)``.
* Any other ``T *`` -> ``POINTER(<ctypes type of T>)``; the structs are
  :class:`SecretStoreCallbacks`, :class:`VoiceDerivationStruct`,
  :class:`ImportReportStruct`, :class:`StoreLossStruct`, :class:`ApprovalRequestInfoStruct`,
  :class:`CredentialInfoStruct`, :class:`ApprovalResultStruct` and
  :class:`ReplayStoreCallbacks`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Dict, List, Mapping, Optional, Tuple

__all__ = [
    "ABI_VERSION",
    "BUNDLED_LIBRARY_FILE",
    "LIBRARY_ENV",
    "LibraryVersionError",
    "SYSTEM_LIBRARY_FILE",
    "GetCallback",
    "PutCallback",
    "RemoveCallback",
    "DestroyCallback",
    "SecretStoreCallbacks",
    "VoiceDerivationStruct",
    "ImportReportStruct",
    "StoreLossStruct",
    "ApprovalRequestInfoStruct",
    "CredentialInfoStruct",
    "ApprovalResultStruct",
    "ReplayInsertCallback",
    "ReplayDestroyCallback",
    "ReplayStoreCallbacks",
    "SIGNATURES",
    "check_version",
    "find_library_path",
    "load_library",
    "lib",
    "version_text",
]

#: Environment variable naming the shared library to load (a path).
LIBRARY_ENV = "ITSME_LIBRARY"
#: The library's file name inside the package, where the wheel bundles it.
BUNDLED_LIBRARY_FILE = "libitsme.so"
#: The name left to the dynamic loader when ctypes.util.find_library finds nothing.
SYSTEM_LIBRARY_FILE = "libitsme.so"
#: The ABI this binding was written for, (MAJOR, MINOR): while the major
#: version is 0 the minor names the ABI (include/itsme.h, "Compatibility"),
#: so any libitsme 0.2.x will do and no other.
ABI_VERSION: Tuple[int, int] = (0, 2)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_result = c_int32
_handle = c_void_p
_handle_out = POINTER(c_void_p)
_text = c_char_p
_bytes = POINTER(c_uint8)
_size_out = POINTER(c_size_t)
_state = c_uint32  # itsme_verification_state
_method = c_uint32  # itsme_exchange_method
_exchange_state = c_uint32  # itsme_exchange_state
_voice_state = c_uint32  # itsme_voice_state
_voice_outcome = c_uint32  # itsme_voice_outcome
_online_verify_state = c_uint32  # itsme_online_verify_state
_pin_update_state = c_uint32  # itsme_pin_update_state
_transfer_state = c_uint32  # itsme_transfer_state
_approval_decision = c_uint32  # itsme_approval_decision

# Host secret-store callbacks (itsme_secret_store_callbacks).
GetCallback = CFUNCTYPE(_result, c_void_p, c_char_p, _bytes, c_size_t, _size_out)
PutCallback = CFUNCTYPE(_result, c_void_p, c_char_p, _bytes, c_size_t, c_uint32)
RemoveCallback = CFUNCTYPE(_result, c_void_p, c_char_p)
DestroyCallback = CFUNCTYPE(None, c_void_p)


class SecretStoreCallbacks(Structure):
    """``itsme_secret_store_callbacks``: a host secret store's table."""

    _fields_ = [
        ("ctx", c_void_p),
        ("get", GetCallback),
        ("put", PutCallback),
        ("remove", RemoveCallback),
        ("destroy", DestroyCallback),
    ]


class VoiceDerivationStruct(Structure):
    """``itsme_voice_derivation``: what one side derives in a voice session."""

    _fields_ = [
        ("session_id", c_uint32),
        ("my_words", c_uint8 * 5),
        ("their_words", c_uint8 * 5),
        ("i_select_first", c_uint8),
        ("reserved", c_uint8),
        ("my_code", c_uint32),
        ("their_code", c_uint32),
        ("my_tag", c_uint32),
        ("their_tag", c_uint32),
    ]


class StoreLossStruct(Structure):
    """``itsme_store_loss``: what accepting a store's loss gave up."""

    _fields_ = [
        ("replaced", c_int32),
        ("commits_lost", c_uint64),
        ("contacts_before", c_uint64),
        ("contacts_now", c_uint64),
        ("contacts_missing", c_uint64),
        ("photos_missing", c_uint64),
        ("device_secrets_missing", c_uint64),
        ("contacts_without_their_photo", c_uint64),
    ]


class ImportReportStruct(Structure):
    """``itsme_import_report``: what installing an import would do."""

    _fields_ = [
        ("wrong_identity", c_int32),
        ("other_fingerprint", c_char * 17),  # ITSME_FINGERPRINT_SIZE
        ("store_exists", c_int32),
        ("contacts_readable", c_uint64),
        ("contacts_unreadable", c_uint64),
        ("device_secrets", c_uint64),
    ]


# Sizes of the approval structs' arrays (include/itsme.h).
_CREDENTIAL_ID_BYTES = 16  # ITSME_CREDENTIAL_ID_BYTES
_SERVICE_ID_MAX_BYTES = 255  # ITSME_SERVICE_ID_MAX_BYTES
_SESSION_ID_MAX_BYTES = 128  # ITSME_SESSION_ID_MAX_BYTES
_OTP_SIZE = 7  # ITSME_OTP_SIZE
_SCOPES_TEXT_SIZE = 2080  # ITSME_SCOPES_TEXT_SIZE


class ApprovalRequestInfoStruct(Structure):
    """``itsme_approval_request_info``: a service approval request, as read
    from its bytes."""

    _fields_ = [
        ("service_id", c_char * (_SERVICE_ID_MAX_BYTES + 1)),
        ("service_name", c_char * 129),
        ("session_id", c_char * (_SESSION_ID_MAX_BYTES + 1)),
        ("otp", c_char * _OTP_SIZE),
        ("issued_at", c_int64),
        ("expires_at", c_int64),
        ("scopes", c_char * _SCOPES_TEXT_SIZE),
    ]


class CredentialInfoStruct(Structure):
    """``itsme_credential_info``: what a service learns from an enrollment."""

    _fields_ = [
        ("credential_id", c_uint8 * _CREDENTIAL_ID_BYTES),
        ("public_key", c_uint8 * 32),
        ("label", c_char * 129),
    ]


class ApprovalResultStruct(Structure):
    """``itsme_approval_result``: what a verified approval says."""

    _fields_ = [
        ("decision", _approval_decision),
        ("credential_id", c_uint8 * _CREDENTIAL_ID_BYTES),
        ("timestamp", c_int64),
        ("granted_scopes", c_char * _SCOPES_TEXT_SIZE),
    ]


# Host replay-store callbacks (itsme_replay_store_callbacks).
ReplayInsertCallback = CFUNCTYPE(_result, c_void_p, _bytes, c_int64, c_int64, POINTER(c_int32))
ReplayDestroyCallback = CFUNCTYPE(None, c_void_p)


class ReplayStoreCallbacks(Structure):
    """``itsme_replay_store_callbacks``: a host replay store's table."""

    _fields_ = [
        ("ctx", c_void_p),
        ("insert", ReplayInsertCallback),
        ("destroy", ReplayDestroyCallback),
    ]


#: Every function of include/itsme.h: name -> (restype, [argtypes]).
SIGNATURES: Dict[str, Tuple[Optional[type], List[type]]] = {
    # Version and result codes
    "itsme_version_string": (c_char_p, []),
    "itsme_version_number": (c_uint32, []),
    "itsme_result_message": (c_char_p, [_result]),
    # Initialisation and sizes
    "itsme_init": (_result, []),
    "itsme_last_error": (_result, [_text, c_size_t, _size_out]),
    "itsme_public_key_bytes": (c_size_t, []),
    "itsme_fingerprint_size": (c_size_t, []),
    "itsme_name_max_bytes": (c_size_t, []),
    "itsme_fingerprint_from_public_key": (
        _result,
        [_bytes, c_size_t, _text, c_size_t, _size_out],
    ),
    # Secret store
    "itsme_secret_store_new_callbacks": (
        _result,
        [POINTER(SecretStoreCallbacks), _handle_out],
    ),
    "itsme_secret_store_new_memory": (_result, [_handle_out]),
    "itsme_secret_store_open_file": (_result, [_text, _handle_out]),
    "itsme_secret_store_free": (None, [_handle]),
    "itsme_secret_store_last_error": (
        _result,
        [_handle, _text, c_size_t, _size_out],
    ),
    # Identity
    "itsme_identity_create": (_result, [_handle, _text, _handle_out]),
    "itsme_identity_load": (_result, [_handle, _handle_out]),
    "itsme_identity_free": (None, [_handle]),
    "itsme_identity_last_error": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_identity_fingerprint": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_identity_public_key": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_identity_name": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_identity_set_name": (_result, [_handle, _text]),
    # PIN
    "itsme_pin_is_set": (_result, [_handle, POINTER(c_int)]),
    "itsme_pin_set": (_result, [_handle, _text]),
    "itsme_pin_verify": (_result, [_handle, _text, c_int64]),
    "itsme_pin_change": (_result, [_handle, _text, _text, c_int64]),
    "itsme_pin_status": (
        _result,
        [_handle, c_int64, POINTER(c_uint32), POINTER(c_uint64)],
    ),
    # Contact store
    "itsme_store_open": (_result, [_handle, _text, _handle_out]),
    "itsme_store_accept_loss": (_result, [_handle, _text, POINTER(StoreLossStruct)]),
    "itsme_store_free": (None, [_handle]),
    "itsme_store_close": (None, [_handle]),  # deprecated alias of itsme_store_free (until 0.3)
    "itsme_store_last_error": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_store_add": (
        _result,
        [_handle, _text, _bytes, c_size_t, _bytes, c_size_t, _method, c_int64, POINTER(c_int64)],
    ),
    "itsme_store_add_unauthenticated": (
        _result,
        [_handle, _text, _text, _bytes, c_size_t, _method, c_int64, POINTER(c_int64)],
    ),
    "itsme_store_get": (_result, [_handle, c_int64, _handle_out]),
    "itsme_store_get_by_key": (_result, [_handle, _bytes, c_size_t, _handle_out]),
    "itsme_store_find_fingerprint": (_result, [_handle, _text, _handle_out]),
    "itsme_store_list": (_result, [_handle, c_int64, c_size_t, _handle_out]),
    "itsme_store_count": (_result, [_handle, POINTER(c_uint64)]),
    "itsme_store_expire_awaiting": (_result, [_handle, c_int64, POINTER(c_uint64)]),
    "itsme_store_set_name": (_result, [_handle, c_int64, _text]),
    "itsme_store_set_note": (_result, [_handle, c_int64, _text]),
    "itsme_store_set_state": (_result, [_handle, c_int64, _state, c_int, c_int64]),
    "itsme_store_use_window": (_result, [_handle, c_int64, c_int64]),
    "itsme_store_delete": (_result, [_handle, c_int64]),
    "itsme_store_backup": (_result, [_handle, _text]),
    "itsme_contact_free": (None, [_handle]),
    "itsme_contact_id": (_result, [_handle, POINTER(c_int64)]),
    "itsme_contact_name": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_contact_fingerprint": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_contact_public_key": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_contact_is_authenticated": (_result, [_handle, POINTER(c_int)]),
    "itsme_contact_state": (_result, [_handle, POINTER(_state), POINTER(c_int)]),
    "itsme_contact_exchange_method": (_result, [_handle, POINTER(_method)]),
    "itsme_contact_created_at": (_result, [_handle, POINTER(c_int64)]),
    "itsme_contact_verified_at": (_result, [_handle, POINTER(c_int64)]),
    "itsme_contact_last_window": (_result, [_handle, POINTER(c_int64)]),
    "itsme_contact_note": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_contact_list_free": (None, [_handle]),
    "itsme_contact_list_count": (_result, [_handle, _size_out]),
    "itsme_contact_list_get": (_result, [_handle, c_size_t, _handle_out]),
    # Deterministic randomness
    "itsme_random_new_deterministic": (_result, [_bytes, c_size_t, _handle_out]),
    "itsme_random_free": (None, [_handle]),
    "itsme_identity_create_with_random": (_result, [_handle, _text, _handle, _handle_out]),
    # Short codes
    "itsme_short_code_parse": (_result, [_text, POINTER(c_uint32)]),
    "itsme_short_code_format": (_result, [c_uint32, _text, c_size_t, _size_out]),
    # Contact exchange in person
    "itsme_exchange_new_qr": (_result, [_handle, _handle, c_int64, _handle_out]),
    "itsme_exchange_new_bluetooth": (_result, [_handle, _text, _handle, c_int64, _handle_out]),
    "itsme_exchange_free": (None, [_handle]),
    "itsme_exchange_last_error": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_exchange_status": (_result, [_handle, POINTER(_exchange_state), POINTER(c_uint32)]),
    "itsme_exchange_get_method": (_result, [_handle, POINTER(_method)]),
    "itsme_exchange_session_code": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_exchange_next_outgoing": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_exchange_receive": (_result, [_handle, _bytes, c_size_t, c_int64]),
    "itsme_exchange_sas": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_exchange_peer_name": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_exchange_peer_fingerprint": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_exchange_peer_public_key": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_exchange_save": (_result, [_handle, _handle, c_int64, POINTER(c_int64)]),
    "itsme_exchange_confirm": (_result, [_handle, _handle, c_int64, POINTER(c_int64)]),
    "itsme_exchange_settle": (_result, [_handle, _handle, c_int64, POINTER(c_int64)]),
    "itsme_exchange_reject": (_result, [_handle, _handle]),
    "itsme_exchange_seal": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_exchange_restore": (_result, [_handle, _bytes, c_size_t, c_int64, _handle_out]),
    # Contact exchange at a distance
    "itsme_remote_code_check": (_result, [_text, _text, c_size_t, _size_out]),
    "itsme_exchange_new_invite": (_result, [_handle, c_int, _handle, c_int64, _handle_out]),
    "itsme_exchange_accept_invite": (_result, [_handle, _text, _text, c_int, _handle, c_int64, _handle_out]),
    "itsme_exchange_invite_code": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_exchange_encryption_code": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_exchange_relay_id": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_exchange_is_inviter": (_result, [_handle, POINTER(c_int)]),
    # Pure derivations
    "itsme_derive_seed": (
        _result,
        [_bytes, c_size_t, _bytes, c_size_t, _text, _text, _bytes, c_size_t, _size_out],
    ),
    "itsme_derive_sas": (_result, [_bytes, c_size_t, _bytes, c_size_t, _text, c_size_t, _size_out]),
    "itsme_qr_transcript_hash": (
        _result,
        [_bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _size_out],
    ),
    "itsme_bluetooth_commitment": (
        _result,
        [_bytes, c_size_t, _bytes, c_size_t, _text, _bytes, c_size_t, _bytes, c_size_t, _size_out],
    ),
    "itsme_bluetooth_th1": (
        _result,
        [_text, _bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _size_out],
    ),
    "itsme_bluetooth_session_keys": (
        _result,
        [_bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _size_out],
    ),
    "itsme_bluetooth_transcript_hash": (
        _result,
        [_bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _size_out],
    ),
    # Voice verification
    "itsme_nato_word": (c_char_p, [c_uint32]),
    "itsme_voice_new": (_result, [_handle, c_int64, c_int64, _handle_out]),
    "itsme_voice_free": (None, [_handle]),
    "itsme_voice_last_error": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_voice_status": (_result, [_handle, POINTER(_voice_state), POINTER(c_uint32)]),
    "itsme_voice_timing": (
        _result,
        [_handle, c_int64, POINTER(c_int64), POINTER(c_int64), POINTER(c_int64)],
    ),
    "itsme_voice_start": (_result, [_handle, _handle, c_int64]),
    "itsme_voice_session_id": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_voice_words": (_result, [_handle, _bytes, c_size_t]),
    "itsme_voice_select": (_result, [_handle, c_uint32, c_int64]),
    "itsme_voice_your_code": (_result, [_handle, _text, c_size_t, _size_out, POINTER(c_uint32)]),
    "itsme_voice_their_code": (_result, [_handle, _text, c_size_t, _size_out, POINTER(c_uint32)]),
    "itsme_voice_check": (
        _result,
        [_handle, _handle, _text, c_uint32, c_int64, POINTER(_voice_outcome)],
    ),
    "itsme_derive_session_id": (_result, [_bytes, c_size_t, c_int64, _text, c_size_t, _size_out]),
    "itsme_derive_words": (_result, [_bytes, c_size_t, c_int64, _bytes, c_size_t, _bytes, c_size_t]),
    "itsme_derive_lower_selects_first": (_result, [_bytes, c_size_t, c_int64, POINTER(c_int)]),
    "itsme_derive_code": (
        _result,
        [
            _bytes, c_size_t, c_int64,
            _bytes, c_size_t, c_uint32,
            _bytes, c_size_t, c_uint32,
            _bytes, c_size_t,
            _text, c_size_t, _size_out,
        ],
    ),
    "itsme_derive_device_tag": (
        _result,
        [_bytes, c_size_t, c_int64, _bytes, c_size_t, _bytes, c_size_t, POINTER(c_uint32)],
    ),
    "itsme_derive_voice": (
        _result,
        [
            _bytes, c_size_t, c_int64,
            _bytes, c_size_t, _bytes, c_size_t,
            _bytes, c_size_t, _bytes, c_size_t,
            c_uint32, c_uint32,
            POINTER(VoiceDerivationStruct),
        ],
    ),
    # The degradation code
    "itsme_store_degradation_code": (_result, [_handle, c_int64, _handle, _text, c_size_t, _size_out]),
    "itsme_store_accept_degradation_code": (_result, [_handle, c_int64, _text, c_int64]),
    "itsme_derive_degradation_code": (
        _result,
        [_bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _text, c_size_t, _size_out],
    ),
    # Online Verify
    "itsme_online_verify_new": (_result, [_handle, c_int64, c_int64, _handle, c_int64, _handle_out]),
    "itsme_online_verify_free": (None, [_handle]),
    "itsme_online_verify_last_error": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_online_verify_status": (_result, [_handle, POINTER(_online_verify_state)]),
    "itsme_online_verify_room": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_online_verify_next_outgoing": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_online_verify_receive": (_result, [_handle, _bytes, c_size_t, c_int64]),
    "itsme_online_verify_sas": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_online_verify_confirm": (_result, [_handle, _handle, c_int64, POINTER(_voice_outcome)]),
    "itsme_online_verify_reject": (_result, [_handle]),
    # Security PIN Update
    "itsme_pin_update_new": (_result, [_handle, c_int64, c_int64, _handle, c_int64, _handle_out]),
    "itsme_pin_update_free": (None, [_handle]),
    "itsme_pin_update_last_error": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_pin_update_status": (_result, [_handle, POINTER(_pin_update_state)]),
    "itsme_pin_update_session_code": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_pin_update_next_outgoing": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_pin_update_receive": (_result, [_handle, _bytes, c_size_t, c_int64]),
    # Device transfer: the password export
    "itsme_export_generate_password": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_identity_export": (
        _result,
        [_handle, _text, c_int64, _text, c_uint32, _handle, _bytes, c_size_t, _size_out],
    ),
    "itsme_export_to_text": (_result, [_bytes, c_size_t, _text, c_size_t, _size_out]),
    "itsme_export_from_text": (_result, [_text, _bytes, c_size_t, _size_out]),
    "itsme_export_header": (
        _result,
        [_bytes, c_size_t, POINTER(c_uint32), POINTER(c_uint32), POINTER(c_uint32)],
    ),
    # Device transfer: imports
    "itsme_import_open": (_result, [_handle, _bytes, c_size_t, _text, c_int64, _handle_out]),
    "itsme_import_status": (
        _result,
        [_handle, c_int64, POINTER(c_uint32), POINTER(c_uint64)],
    ),
    "itsme_import_free": (None, [_handle]),
    "itsme_import_last_error": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_import_fingerprint": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_import_name": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_import_check": (_result, [_handle, _handle, _text, POINTER(ImportReportStruct)]),
    "itsme_import_install": (_result, [_handle, _handle, _text, c_uint32, _handle_out]),
    # Device transfer: the live transfer
    "itsme_transfer_new_receiver": (_result, [_handle, c_int64, _handle_out]),
    "itsme_transfer_new_sender": (_result, [_handle, _text, _text, _handle, c_int64, _handle_out]),
    "itsme_transfer_free": (None, [_handle]),
    "itsme_transfer_last_error": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_transfer_status": (_result, [_handle, POINTER(_transfer_state)]),
    "itsme_transfer_offer": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_transfer_room": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_transfer_next_outgoing": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_transfer_receive": (_result, [_handle, _bytes, c_size_t, c_int64]),
    "itsme_transfer_sas": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_transfer_confirm": (_result, [_handle, c_int64]),
    "itsme_transfer_reject": (_result, [_handle]),
    "itsme_transfer_take_import": (_result, [_handle, _handle_out]),
    # Online Verify: the profile reference in the PROOF
    "itsme_online_verify_share_profile": (_result, [_handle, _bytes, c_size_t]),
    "itsme_online_verify_peer_profile": (_result, [_handle, _bytes, c_size_t, _size_out]),
    # Profile records
    "itsme_profile_create": (_result, [_handle, _text, _bytes, c_size_t, _text, _handle, _handle_out]),
    "itsme_profile_open": (
        _result,
        [_bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _handle_out],
    ),
    "itsme_profile_free": (None, [_handle]),
    "itsme_profile_name": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_profile_photo": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_profile_photo_filename": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_profile_record": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_profile_record_id": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_profile_record_name": (_result, [_handle, _text, c_size_t, _size_out]),
    "itsme_profile_reference": (_result, [_handle, _bytes, c_size_t, _size_out]),
    "itsme_store_apply_profile": (_result, [_handle, c_int64, _handle]),
    "itsme_store_set_photo": (_result, [_handle, c_int64, _bytes, c_size_t, _text]),
    "itsme_store_photo": (_result, [_handle, c_int64, _bytes, c_size_t, _size_out]),
    "itsme_store_photo_filename": (_result, [_handle, c_int64, _text, c_size_t, _size_out]),
    # Service approvals
    "itsme_credential_enroll": (
        _result,
        [_handle, _text, _text, _bytes, c_size_t, _handle, _bytes, c_size_t, _size_out],
    ),
    "itsme_credential_id": (_result, [_handle, _text, _bytes, c_size_t, _size_out]),
    "itsme_credential_remove": (_result, [_handle, _text]),
    "itsme_approval_request_parse": (
        _result,
        [_bytes, c_size_t, c_int64, POINTER(ApprovalRequestInfoStruct)],
    ),
    "itsme_approval_sign": (
        _result,
        [_handle, _bytes, c_size_t, _approval_decision, _text, c_int64, _bytes, c_size_t, _size_out],
    ),
    "itsme_enrollment_verify": (
        _result,
        [_text, _bytes, c_size_t, _bytes, c_size_t, POINTER(CredentialInfoStruct)],
    ),
    "itsme_approval_request_create": (
        _result,
        [_text, _text, _text, _text, c_int64, _handle, c_int64, _bytes, c_size_t, _size_out],
    ),
    "itsme_replay_store_new_memory": (_result, [c_size_t, _handle_out]),
    "itsme_replay_store_new_callbacks": (_result, [POINTER(ReplayStoreCallbacks), _handle_out]),
    "itsme_replay_store_free": (None, [_handle]),
    "itsme_approval_verify": (
        _result,
        [_bytes, c_size_t, _bytes, c_size_t, _bytes, c_size_t, _handle, c_int64, POINTER(ApprovalResultStruct)],
    ),
}


def _system_library() -> Tuple[str, str]:
    """The system's libitsme: what ``ctypes.util.find_library`` finds, else
    plain ``"libitsme.so"`` left to the dynamic loader's search path.
    Returns (what to load, how it was found)."""
    found = ctypes.util.find_library("itsme")
    if found:
        return found, f"the system's libitsme ({found!r}, found by ctypes.util.find_library)"
    return (
        SYSTEM_LIBRARY_FILE,
        f"the system's libitsme (ctypes.util.find_library found none; "
        f"{SYSTEM_LIBRARY_FILE!r} on the dynamic loader's search path)",
    )


def _search(
    environ: Optional[Mapping[str, str]] = None, package_dir: Optional[str] = None
) -> Tuple[str, List[str]]:
    """(what to load, every place looked at on the way, in order)."""
    environ = os.environ if environ is None else environ
    package_dir = _PACKAGE_DIR if package_dir is None else package_dir
    override = environ.get(LIBRARY_ENV)
    if override:
        return override, [f"{LIBRARY_ENV}={override!r}"]
    tried = [f"{LIBRARY_ENV} (not set)"]
    bundled = os.path.join(package_dir, BUNDLED_LIBRARY_FILE)
    if os.path.exists(bundled):
        return bundled, tried + [f"the library bundled in the package ({bundled!r})"]
    tried.append(f"the library bundled in the package ({bundled!r}: not there)")
    path, how = _system_library()
    return path, tried + [how]


def find_library_path(
    environ: Optional[Mapping[str, str]] = None, package_dir: Optional[str] = None
) -> str:
    """Where to load libitsme from.

    In order: the ``ITSME_LIBRARY`` environment variable (a path), which
    overrides everything; else ``libitsme.so`` in the package's directory
    (the library bundled in the wheel), if it is there; else the system's:
    ``ctypes.util.find_library("itsme")``, then plain ``"libitsme.so"`` left
    to the dynamic loader's search path.

    ``environ`` (default ``os.environ``) and ``package_dir`` (default this
    package's directory) are for tests.
    """
    return _search(environ, package_dir)[0]


def version_text(number: int) -> str:
    """An ``itsme_version_number()`` value as ``"MAJOR.MINOR.PATCH"``."""
    return f"{number // 10000}.{number // 100 % 100}.{number % 100}"


class LibraryVersionError(OSError):
    """The libitsme found is of another ABI than this binding's.

    While the major version is 0 the minor version names the ABI, so the
    binding accepts a library whose ``MAJOR.MINOR`` is :data:`ABI_VERSION`,
    whatever its patch level.  Importing :mod:`itsme` raises this error for
    another library; as the import fails, catch it there as ``OSError``
    (which every failure to load the library is).

    Attributes:
        path: the library that was loaded.
        found: its ``itsme_version_number()`` (MAJOR * 10000 + MINOR * 100 + PATCH).
        expected: the ABI this binding was written for, (MAJOR, MINOR).
    """

    def __init__(self, path: str, found: int, expected: Tuple[int, int] = ABI_VERSION) -> None:
        self.path = path
        self.found = found
        self.expected = expected
        wanted = f"{expected[0]}.{expected[1]}"
        super().__init__(
            f"{path!r} is libitsme {version_text(found)}, but this binding of itsme "
            f"was written for libitsme {wanted} (any {wanted}.x): install the matching "
            f"library or binding, or set {LIBRARY_ENV} to the path of a libitsme {wanted}.x"
        )

    def __reduce__(self) -> Tuple[type, Tuple[str, int, Tuple[int, int]]]:
        return (type(self), (self.path, self.found, self.expected))


def check_version(library: ctypes.CDLL, path: str) -> int:
    """Refuses a library whose MAJOR.MINOR is not :data:`ABI_VERSION`.

    Calls ``itsme_version_number()`` (which needs no ``itsme_init()``) and
    returns it; raises :class:`LibraryVersionError` for another ABI and
    ``OSError`` if the library does not export the function.
    """
    try:
        function = library.itsme_version_number
    except AttributeError as error:
        raise OSError(f"{path!r} does not export itsme_version_number: it is not libitsme") from error
    function.restype = c_uint32
    function.argtypes = []
    number = int(function())
    if (number // 10000, number // 100 % 100) != ABI_VERSION:
        raise LibraryVersionError(path, number)
    return number


_FIX = (
    "install the itsme-verify wheel (it bundles the library), install libitsme "
    f"(make install), or set {LIBRARY_ENV} to the path of libitsme.so"
)


def load_library(path: Optional[str] = None) -> ctypes.CDLL:
    """Loads libitsme, checks its version and declares every function of
    :data:`SIGNATURES`.

    Without ``path``, the library is looked for as :func:`find_library_path`
    says.  Does not call ``itsme_init()``.  Raises :class:`LibraryVersionError`
    for a library of another ABI, and ``OSError`` if the library cannot be
    loaded or lacks one of the functions.
    """
    if path is None:
        path, tried = _search()
    else:
        tried = [f"{path!r} (given)"]
    try:
        library = ctypes.CDLL(path)
    except OSError as error:
        raise OSError(
            f"cannot load libitsme from {path!r} ({error}).  Looked at: "
            + "; ".join(tried)
            + f".  To fix it, {_FIX}."
        ) from error
    check_version(library, path)
    for name, (restype, argtypes) in SIGNATURES.items():
        try:
            function = getattr(library, name)
        except AttributeError as error:
            raise OSError(f"{path!r} does not export {name}") from error
        function.restype = restype
        function.argtypes = list(argtypes)
    return library


#: The loaded library, with every signature declared.
lib = load_library()
