"""`decode`: a kernel's message read as jupyter_client's `Session.deserialize` reads it, with its dates left as text."""

from __future__ import annotations

import pytest
from jupyter_client.session import Session

from freeact_sub.kernels.local_manager import decode


def _frames(session: Session, content: dict[str, object], parent: dict[str, object] | None = None) -> list[bytes]:
    message = session.msg("stream", content, parent=parent or {})
    return [bytes(part) for part in session.serialize(message, ident=b"kernel")]


def test_a_signed_message_reads_as_jupyter_client_reads_it_with_its_dates_as_text() -> None:
    session = Session(key=b"secret")
    parent = session.msg_header("execute_request")
    frames = _frames(session, {"name": "stdout", "text": "hi"}, parent)
    ours = decode(session, list(frames))
    theirs = Session(key=b"secret").deserialize(Session(key=b"secret").feed_identities(frames)[1])
    assert ours["content"] == theirs["content"] == {"name": "stdout", "text": "hi"}
    assert ours["msg_type"] == theirs["msg_type"] == "stream"
    assert ours["parent_header"]["msg_id"] == theirs["parent_header"]["msg_id"] == parent["msg_id"]
    assert isinstance(ours["header"]["date"], str)  # jupyter_client parses it with dateutil; nothing here reads it
    assert ours["header"]["date"] == theirs["header"]["date"].isoformat().replace("+00:00", "Z")


def test_a_message_signed_with_another_key_or_changed_or_sent_twice_is_refused() -> None:
    session = Session(key=b"secret")
    with pytest.raises(ValueError, match="invalid signature"):
        decode(session, _frames(Session(key=b"other"), {"text": "forged"}))
    changed = _frames(session, {"text": "hi"})
    changed[-1] = changed[-1].replace(b"hi", b"ho")
    with pytest.raises(ValueError, match="invalid signature"):
        decode(session, changed)
    frames = _frames(session, {"text": "once"})
    decode(session, list(frames))
    with pytest.raises(ValueError, match="duplicate signature"):
        decode(session, list(frames))
    with pytest.raises(ValueError, match="5 parts"):
        decode(session, [b"kernel", b"<IDS|MSG>", b"", b"{}"])


def test_the_signatures_remembered_stay_bounded() -> None:
    session = Session(key=b"secret", digest_history_size=20)
    for number in range(100):
        decode(session, _frames(session, {"n": number}))
    assert 0 < len(session.digest_history) <= 20
