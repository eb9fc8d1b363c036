/*
 * Fixtures of the contract suite (abi/tools/c_contract.py writes
 * tests/c/contract_test.c from abi/itsme.abi.json and this file).
 *
 * FIXTURE(function, statements): one line per function that writes an
 * output (the generator fails, naming it, when one has none), optional for
 * the others.  The statements set the arguments, `a->parameter`, where the
 * call succeeds; those left alone keep their defaults: the handle
 * fx_<type>() (contract_support.h), the text FX_TEXT, 32 bytes of fx_bytes
 * (one item for a counted array), 0, the time FX_NOW, fx_<callback table>().
 * From it the suite derives its checks: each text not UTF-8 and too long,
 * each time out of range, each output buffer's size query, cap - 1 and
 * exact cap, every output written on success.
 *
 * A pointer the header annotates ITSME_OPTIONAL (the JSON's "optional") may
 * be NULL: with the fixture, the call still succeeds.  NULL_OK(function,
 * parameter) says the same for one the header does not annotate.
 * BAD_TEXT(function, parameter, code): the code this text gives when it is
 * not UTF-8 or too long, where the header names one other than
 * ITSME_E_INVALID_ARGUMENT.
 */

/* Version, initialisation, sizes */
FIXTURE(itsme_last_error, itsme_secret_store *none = NULL; fx_failed(itsme_secret_store_open_file("/dev/null", &none)))
FIXTURE(itsme_fingerprint_from_public_key, a->public_key = fx_bytes)

/* Secret stores and identities */
FIXTURE(itsme_secret_store_new_callbacks, a->callbacks = fx_itsme_secret_store_callbacks())
FIXTURE(itsme_secret_store_new_memory, (void)0)
FIXTURE(itsme_secret_store_open_file, a->directory = ct_dir)
FIXTURE(itsme_secret_store_create_file_passphrase, a->directory = ct_path("secrets"))
FIXTURE(itsme_secret_store_open_file_passphrase, a->directory = fx_wrapped_dir())
FIXTURE(itsme_secret_store_is_passphrase_wrapped, a->directory = fx_wrapped_dir())
FIXTURE(itsme_secret_store_last_error, itsme_identity *none = NULL; fx_failed(itsme_identity_load(fx_new_secret_store(), &none)); a->store = fx_itsme_secret_store())
FIXTURE(itsme_identity_create, a->store = fx_new_secret_store(); a->name = "Alice")
FIXTURE(itsme_identity_load, fx_itsme_identity(); a->store = fx_itsme_secret_store())
FIXTURE(itsme_identity_last_error, fx_failed(itsme_pin_verify(fx_itsme_identity(), FX_PIN, FX_NOW)); a->identity = fx_itsme_identity())
FIXTURE(itsme_identity_fingerprint, a->identity = fx_itsme_identity())
FIXTURE(itsme_identity_public_key, a->identity = fx_itsme_identity())
FIXTURE(itsme_identity_name, a->identity = fx_itsme_identity())
FIXTURE(itsme_identity_set_name, a->name = "Alice Smith")
FIXTURE(itsme_pin_is_set, a->identity = fx_itsme_identity())
FIXTURE(itsme_pin_set, a->pin = FX_PIN)
BAD_TEXT(itsme_pin_set, pin, ITSME_E_INVALID_PIN)
FIXTURE(itsme_pin_verify, a->identity = fx_identity_with_pin(); a->pin = FX_PIN)
BAD_TEXT(itsme_pin_verify, pin, ITSME_E_INVALID_PIN)
FIXTURE(itsme_pin_status, a->identity = fx_identity_with_pin())

/* The contact store */
FIXTURE(itsme_store_open, a->path = ct_path("new.db"))
FIXTURE(itsme_store_accept_loss, a->path = fx_closed_store_path())
FIXTURE(itsme_store_last_error, fx_failed(itsme_store_delete(fx_itsme_store(), 999)); a->store = fx_itsme_store())
FIXTURE(itsme_store_add, a->name = "Cid"; a->method = ITSME_EXCHANGE_METHOD_QR)
FIXTURE(itsme_store_add_unauthenticated, a->name = "Old"; a->fingerprint = fx_contact_fingerprint(); a->method = ITSME_EXCHANGE_METHOD_QR)
FIXTURE(itsme_store_get, a->id = fx_contact())
FIXTURE(itsme_store_get_by_key, fx_contact(); a->public_key = fx_bytes)
FIXTURE(itsme_store_find_fingerprint, fx_contact(); a->fingerprint = fx_contact_fingerprint())
FIXTURE(itsme_store_list, fx_contact(); a->limit = 10)
FIXTURE(itsme_store_count, fx_contact())
FIXTURE(itsme_store_expire_awaiting, fx_contact())
FIXTURE(itsme_store_set_name, a->id = fx_contact(); a->name = "Anne")
FIXTURE(itsme_store_set_note, a->id = fx_contact(); a->note = "a note")
FIXTURE(itsme_store_backup, a->path = ct_path("backup.db"))
FIXTURE(itsme_contact_id, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_name, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_fingerprint, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_public_key, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_is_authenticated, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_state, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_exchange_method, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_created_at, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_verified_at, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_last_window, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_note, a->contact = fx_itsme_contact())
FIXTURE(itsme_contact_list_count, a->list = fx_itsme_contact_list())
FIXTURE(itsme_contact_list_get, a->list = fx_itsme_contact_list(); a->index = 0)

/* Random sources, short codes */
FIXTURE(itsme_random_new_deterministic, a->seed = fx_bytes)
FIXTURE(itsme_identity_create_with_random, a->store = fx_new_secret_store(); a->name = "Alice")
FIXTURE(itsme_short_code_parse, a->text = "ECHO 0042")
FIXTURE(itsme_short_code_format, a->value = 130000)

/* Exchanges */
FIXTURE(itsme_exchange_new_qr, a->identity = fx_itsme_identity())
FIXTURE(itsme_exchange_new_bluetooth, a->session_code = "ALFA 0000")
FIXTURE(itsme_exchange_last_error, fx_failed(itsme_exchange_receive(fx_itsme_exchange(), fx_bytes, 5, FX_NOW)); a->exchange = fx_itsme_exchange())
FIXTURE(itsme_exchange_status, a->exchange = fx_itsme_exchange())
FIXTURE(itsme_exchange_get_method, a->exchange = fx_itsme_exchange())
FIXTURE(itsme_exchange_session_code, a->exchange = fx_exchange_bluetooth())
FIXTURE(itsme_exchange_next_outgoing, a->exchange = fx_itsme_exchange())
FIXTURE(itsme_exchange_receive, a->bytes = fx_bob_payload().bytes; a->len = fx_bob_payload().len)
FIXTURE(itsme_exchange_sas, a->exchange = fx_exchange_compare_sas())
FIXTURE(itsme_exchange_peer_name, a->exchange = fx_exchange_compare_sas())
FIXTURE(itsme_exchange_peer_fingerprint, a->exchange = fx_exchange_compare_sas())
FIXTURE(itsme_exchange_peer_public_key, a->exchange = fx_exchange_compare_sas())
FIXTURE(itsme_exchange_save, a->exchange = fx_exchange_compare_sas(); a->store = fx_itsme_store())
FIXTURE(itsme_exchange_confirm, a->exchange = fx_exchange_compare_sas(); a->store = fx_itsme_store())
FIXTURE(itsme_exchange_settle, a->exchange = fx_exchange_settleable(); a->store = fx_itsme_store())
FIXTURE(itsme_exchange_reject, a->exchange = fx_exchange_compare_sas())
FIXTURE(itsme_exchange_seal, a->exchange = fx_exchange_compare_sas())
FIXTURE(itsme_exchange_restore, a->identity = fx_itsme_identity(); a->sealed = fx_sealed_exchange().bytes; a->len = fx_sealed_exchange().len; a->now = FX_NOW + 60)
FIXTURE(itsme_remote_code_check, a->text = " k7x2 m9pm")
FIXTURE(itsme_exchange_new_invite, a->identity = fx_itsme_identity())
FIXTURE(itsme_exchange_accept_invite, a->identity = fx_bob(); a->invite_code = fx_invite_code(); a->encryption_code = fx_encryption_code())
FIXTURE(itsme_exchange_invite_code, a->exchange = fx_exchange_invite())
FIXTURE(itsme_exchange_encryption_code, a->exchange = fx_exchange_invite())
FIXTURE(itsme_exchange_relay_id, a->exchange = fx_exchange_invite())
FIXTURE(itsme_exchange_is_inviter, a->exchange = fx_exchange_invite())

/* Pure derivations (the test build) */
FIXTURE(itsme_derive_seed, a->fingerprint_a = "0123456789ABCDEF"; a->fingerprint_b = "FEDCBA9876543210")
FIXTURE(itsme_derive_sas, (void)0)
FIXTURE(itsme_qr_transcript_hash, a->payload_a = fx_alice_payload().bytes; a->a_len = fx_alice_payload().len; a->payload_b = fx_bob_payload().bytes; a->b_len = fx_bob_payload().len)
FIXTURE(itsme_bluetooth_commitment, a->name = "Bob"; a->device_secret_len = 16)
FIXTURE(itsme_bluetooth_th1, a->session_code = "ALFA 0000"; a->hello_i = fx_hello(); a->hello_i_len = 42; a->hello_r = fx_hello(); a->hello_r_len = 42; a->key_i = fx_key_frame(); a->key_i_len = 34; a->key_r = fx_key_frame(); a->key_r_len = 34)
FIXTURE(itsme_bluetooth_session_keys, (void)0)
FIXTURE(itsme_bluetooth_transcript_hash, a->plaintext_i = fx_zeros; a->plaintext_i_len = 114; a->plaintext_r = fx_zeros; a->plaintext_r_len = 114)
FIXTURE(itsme_derive_session_id, a->window = 60000000)
FIXTURE(itsme_derive_words, a->window = 60000000)
FIXTURE(itsme_derive_lower_selects_first, a->window = 60000000)
FIXTURE(itsme_derive_code, a->window = 1; a->first_word = 3; a->second = fx_bytes; a->second_len = 8; a->second_word = 4)
FIXTURE(itsme_derive_device_tag, a->window = 1; a->secret = NULL; a->secret_len = 0)
FIXTURE(itsme_derive_voice, a->window = 1; a->my_secret_len = 16; a->their_secret_len = 16; a->first_word = 3; a->second_word = 4)
FIXTURE(itsme_derive_degradation_code, a->secret_len = 10)

/* Voice verification */
FIXTURE(itsme_window_of, (void)0)
FIXTURE(itsme_voice_new, a->contact_id = fx_alice_knows_bob())
FIXTURE(itsme_voice_last_error, fx_failed(itsme_voice_start(fx_itsme_voice(), fx_itsme_store(), FX_NOW)); a->voice = fx_itsme_voice())
FIXTURE(itsme_voice_status, a->voice = fx_itsme_voice())
FIXTURE(itsme_voice_timing, a->voice = fx_itsme_voice())
FIXTURE(itsme_voice_start, a->voice = fx_itsme_voice(); a->now = FX_VOICE_START)
FIXTURE(itsme_voice_session_id, a->voice = fx_voice_started())
FIXTURE(itsme_voice_words, a->voice = fx_voice_started())
FIXTURE(itsme_voice_your_code, a->voice = fx_voice_selected())
FIXTURE(itsme_voice_their_code, a->voice = fx_voice_selected())
FIXTURE(itsme_voice_check, a->heard_code = fx_heard_code(&a->heard_tag); a->voice = fx_bob_voice(); a->store = fx_bob_store(); a->now = FX_VOICE_START + 10)
FIXTURE(itsme_store_degradation_code, a->contact_id = fx_contact())

/* Online Verify, PIN update */
FIXTURE(itsme_online_verify_new, a->contact_id = fx_alice_knows_bob(); a->window = FX_NOW / 30)
FIXTURE(itsme_online_verify_last_error, fx_failed(itsme_online_verify_sas(fx_itsme_online_verify(), NULL, 0, NULL)); a->session = fx_itsme_online_verify())
FIXTURE(itsme_online_verify_status, a->session = fx_itsme_online_verify())
FIXTURE(itsme_online_verify_room, a->session = fx_itsme_online_verify())
FIXTURE(itsme_online_verify_next_outgoing, a->session = fx_online_verify_sending())
FIXTURE(itsme_online_verify_sas, a->session = fx_online_verify_compare_sas())
FIXTURE(itsme_online_verify_confirm, a->session = fx_online_verify_compare_sas(); a->store = fx_itsme_store(); a->now = FX_NOW + 2)
FIXTURE(itsme_online_verify_peer_profile, a->session = fx_online_verify_confirmed())
FIXTURE(itsme_pin_update_new, a->contact_id = fx_alice_knows_bob(); a->window = FX_NOW / 30)
FIXTURE(itsme_pin_update_last_error, fx_failed(itsme_pin_update_receive(fx_itsme_pin_update(), fx_bytes, 3, FX_NOW)); a->update = fx_itsme_pin_update())
FIXTURE(itsme_pin_update_status, a->update = fx_itsme_pin_update())
FIXTURE(itsme_pin_update_session_code, a->update = fx_itsme_pin_update())
FIXTURE(itsme_pin_update_next_outgoing, a->update = fx_itsme_pin_update())

/* Export, import, transfer */
FIXTURE(itsme_export_generate_password, (void)0)
FIXTURE(itsme_identity_export, a->identity = fx_identity_with_pin(); a->pin = FX_PIN; a->password = fx_export_password(); a->password_kind = ITSME_EXPORT_PASSWORD_GENERATED)
BAD_TEXT(itsme_identity_export, pin, ITSME_E_INVALID_PIN)
FIXTURE(itsme_export_to_text, a->blob = fx_export().bytes; a->len = fx_export().len)
FIXTURE(itsme_export_from_text, a->text = fx_export_text())
FIXTURE(itsme_export_header, a->blob = fx_export().bytes; a->len = fx_export().len)
FIXTURE(itsme_import_open, a->store = fx_new_secret_store(); a->blob = fx_export().bytes; a->len = fx_export().len; a->password = FX_PASSWORD)
FIXTURE(itsme_import_status, a->store = fx_new_secret_store())
FIXTURE(itsme_import_last_error, fx_failed(itsme_import_check(fx_itsme_import(), fx_new_secret_store(), "", NULL)); a->import = fx_itsme_import())
FIXTURE(itsme_import_fingerprint, a->import = fx_itsme_import())
FIXTURE(itsme_import_name, a->import = fx_itsme_import())
FIXTURE(itsme_import_check, a->import = fx_itsme_import(); a->store = fx_new_secret_store(); a->store_path = ct_path("none.db"))
FIXTURE(itsme_import_install, a->import = fx_itsme_import(); a->store = fx_new_secret_store(); a->store_path = ct_path("none.db"))
FIXTURE(itsme_transfer_new_receiver, (void)0)
FIXTURE(itsme_transfer_new_sender, a->identity = fx_identity_with_pin(); a->pin = FX_PIN; a->offer = fx_transfer_offer())
BAD_TEXT(itsme_transfer_new_sender, pin, ITSME_E_INVALID_PIN)
FIXTURE(itsme_transfer_last_error, fx_failed(itsme_transfer_confirm(fx_itsme_transfer(), FX_NOW)); a->transfer = fx_itsme_transfer())
FIXTURE(itsme_transfer_status, a->transfer = fx_itsme_transfer())
FIXTURE(itsme_transfer_offer, a->transfer = fx_itsme_transfer())
FIXTURE(itsme_transfer_room, a->transfer = fx_itsme_transfer())
FIXTURE(itsme_transfer_next_outgoing, a->transfer = fx_transfer_sender())
FIXTURE(itsme_transfer_sas, a->transfer = fx_transfer_sender())
FIXTURE(itsme_transfer_take_import, a->transfer = fx_transfer_done())

/* Profiles, credentials, approvals */
FIXTURE(itsme_profile_create, a->name = "Alice Smith"; a->photo = fx_bytes; a->photo_len = 100; a->photo_filename = "alice.jpg")
FIXTURE(itsme_profile_open, a->record = fx_profile_record().bytes; a->record_len = fx_profile_record().len; a->reference = fx_profile_reference().bytes; a->owner_key = fx_public_key(fx_itsme_identity()))
FIXTURE(itsme_profile_name, a->profile = fx_itsme_profile())
FIXTURE(itsme_profile_photo, a->profile = fx_itsme_profile())
FIXTURE(itsme_profile_photo_filename, a->profile = fx_itsme_profile())
FIXTURE(itsme_profile_record, a->profile = fx_itsme_profile())
FIXTURE(itsme_profile_record_id, a->profile = fx_itsme_profile())
FIXTURE(itsme_profile_record_name, a->profile = fx_itsme_profile())
FIXTURE(itsme_profile_reference, a->profile = fx_itsme_profile())
FIXTURE(itsme_store_photo, a->id = fx_contact_with_photo())
FIXTURE(itsme_store_photo_filename, a->id = fx_contact_with_photo())
FIXTURE(itsme_credential_enroll, a->store = fx_new_secret_store(); a->service_id = FX_SERVICE; a->label = "Phone")
FIXTURE(itsme_credential_id, a->store = fx_enrolled_store(); a->service_id = FX_SERVICE)
FIXTURE(itsme_approval_request_parse, a->request = fx_request().bytes; a->len = fx_request().len; a->now = FX_NOW + 1)
FIXTURE(itsme_approval_sign, a->store = fx_enrolled_store(); a->request = fx_request().bytes; a->request_len = fx_request().len; a->decision = ITSME_APPROVAL_APPROVE; a->granted_scopes = "email"; a->now = FX_NOW + 2)
FIXTURE(itsme_enrollment_verify, a->service_id = FX_SERVICE; a->enrollment = fx_enrollment().bytes; a->len = fx_enrollment().len)
FIXTURE(itsme_approval_request_create, a->service_id = FX_SERVICE; a->service_name = "Bank"; a->session_id = "s1"; a->scopes = "email"; a->lifetime = 120)
FIXTURE(itsme_replay_store_new_memory, a->capacity = 16)
FIXTURE(itsme_replay_store_new_callbacks, a->callbacks = fx_itsme_replay_store_callbacks())
FIXTURE(itsme_approval_verify, a->request = fx_request().bytes; a->request_len = fx_request().len; a->approval = fx_approval().bytes; a->approval_len = fx_approval().len; a->public_keys = fx_credential_key(); a->now = FX_NOW + 3)
