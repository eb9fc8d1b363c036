/*
 * Seen only by the Swift export layer.  The public header declares the
 * handle types as incomplete structs; Swift imports pointers to incomplete
 * structs as untyped OpaquePointer, which would make the generated header
 * say `void *`.  Completing them here gives the exported functions the
 * header's exact pointer types.  A handle pointer is never dereferenced as
 * this struct: it is the address of a retained Swift object.
 */
#ifndef ITSME_HANDLES_H
#define ITSME_HANDLES_H
#include "../../include/itsme.h"
struct itsme_secret_store { unsigned char opaque_; };
struct itsme_identity { unsigned char opaque_; };
struct itsme_store { unsigned char opaque_; };
struct itsme_contact { unsigned char opaque_; };
struct itsme_contact_list { unsigned char opaque_; };
struct itsme_random { unsigned char opaque_; };
struct itsme_exchange { unsigned char opaque_; };
struct itsme_voice { unsigned char opaque_; };
struct itsme_online_verify { unsigned char opaque_; };
struct itsme_pin_update { unsigned char opaque_; };
struct itsme_import { unsigned char opaque_; };
struct itsme_transfer { unsigned char opaque_; };
struct itsme_profile { unsigned char opaque_; };
struct itsme_replay_store { unsigned char opaque_; };
struct itsme_mailbox_session { unsigned char opaque_; };
struct itsme_online_verify_rendezvous { unsigned char opaque_; };
struct itsme_room_session { unsigned char opaque_; };
struct itsme_rollcall { unsigned char opaque_; };
#endif
