"""Records (PROTOCOL.md 15.4): immutable bytes under an ID, deleted by token."""

import os

import pytest

from relaytest import assert_error, assert_token, new_id, random_token


def test_put_stores_the_bytes_and_returns_a_delete_token(relay):
    api = relay().api()
    record_id, data = new_id(), bytes(range(256)) + b"\x00\xff"
    response = api.put_record(record_id, data)
    assert response.status_code == 201, response.text
    assert set(response.json()) == {"delete_token"}
    assert_token(response.json()["delete_token"])
    fetched = api.get_record(record_id)
    assert fetched.status_code == 200
    assert fetched.content == data
    assert fetched.headers["content-type"].split(";")[0].strip() == "application/octet-stream"


def test_the_same_bytes_again_succeed_without_a_new_token(relay):
    api = relay().api()
    record_id, data = new_id(), os.urandom(100)
    assert api.put_record(record_id, data).status_code == 201
    again = api.put_record(record_id, data)
    assert again.status_code == 200, again.text
    assert again.json() == {}


def test_a_record_is_immutable(relay):
    api = relay().api()
    record_id, data = new_id(), os.urandom(100)
    assert api.put_record(record_id, data).status_code == 201
    assert_error(api.put_record(record_id, os.urandom(100)), 409, "conflict")
    assert_error(api.put_record(record_id, data + b"!"), 409, "conflict")
    assert_error(api.put_record(record_id, data[:-1]), 409, "conflict")
    assert api.get_record(record_id).content == data


def test_the_default_record_limit_is_262144_bytes(relay):
    r = relay()
    api = r.api()
    biggest = os.urandom(262144)
    record_id = new_id()
    assert api.put_record(record_id, biggest).status_code == 201
    assert api.get_record(record_id).content == biggest
    assert_error(api.put_record(new_id(), biggest + b"!"), 413, "too-large")
    r.assert_serving()


def test_an_empty_record_is_a_bad_request(relay):
    api = relay().api()
    record_id = new_id()
    assert_error(api.put_record(record_id, b""), 400, "bad-request")
    assert_error(api.get_record(record_id), 404, "not-found")


def test_record_over_max_record_is_too_large(relay):
    r = relay(max_record=100)
    api = r.api()
    assert api.put_record(new_id(), b"r" * 100).status_code == 201
    too_big = new_id()
    assert_error(api.put_record(too_big, b"r" * 101), 413, "too-large")
    assert_error(api.get_record(too_big), 404, "not-found")
    r.assert_serving()


def test_deleting_a_record_needs_its_token(relay):
    api = relay().api()
    record_id = new_id()
    token = api.put_record(record_id, b"to be deleted").json()["delete_token"]
    other_token = api.put_record(new_id(), b"another").json()["delete_token"]

    assert_error(api.delete_record(record_id, None), 401, "unauthorized")
    assert_error(api.delete_record(record_id, None, headers={"Authorization": "Bearer short"}), 401, "unauthorized")
    assert_error(api.delete_record(record_id, random_token()), 403, "forbidden")
    assert_error(api.delete_record(record_id, other_token), 403, "forbidden")
    assert api.get_record(record_id).content == b"to be deleted"

    response = api.delete_record(record_id, token)
    assert response.status_code == 204, response.text
    assert response.content == b""
    assert_error(api.get_record(record_id), 404, "not-found")


def test_an_unknown_record_is_not_found(relay):
    api = relay().api()
    assert_error(api.get_record(new_id()), 404, "not-found")


@pytest.mark.parametrize("bad_id", ["ABCDEF0123456789ABCDEF0123456789", "0" * 31, "q" * 32])
def test_malformed_record_ids_are_refused_with_bad_id(relay, bad_id):
    api = relay().api()
    assert_error(api.put_record(bad_id, b"x"), 400, "bad-id")
    assert_error(api.get_record(bad_id), 400, "bad-id")
    assert_error(api.delete_record(bad_id, random_token()), 400, "bad-id")


def test_records_outlive_a_restart_of_the_relay(relay):
    first = relay()
    record_id, data = new_id(), os.urandom(1000)
    token = first.api().put_record(record_id, data).json()["delete_token"]
    first.close()
    second = relay(database=first.database)
    api = second.api()
    assert api.get_record(record_id).content == data
    assert api.put_record(record_id, data).status_code == 200
    assert api.delete_record(record_id, token).status_code == 204
    assert_error(api.get_record(record_id), 404, "not-found")
