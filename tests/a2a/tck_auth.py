"""A pytest plugin, loaded with `-p tck_auth`, that gives the A2A TCK's requests a requester's
Parley agent key: the kit sends no credentials, and Parley answers every A2A call only for an
agent's key. Every request the kit's clients make through httpx gets
`Authorization: Bearer $TCK_BEARER` when the variable is set; nothing else changes.
"""

import os

import httpx

_BEARER = os.environ.get("TCK_BEARER", "")

if _BEARER:
    _send = httpx.Client.send
    _async_send = httpx.AsyncClient.send

    def send(self, request, *args, **kwargs):
        request.headers.setdefault("Authorization", f"Bearer {_BEARER}")
        return _send(self, request, *args, **kwargs)

    async def async_send(self, request, *args, **kwargs):
        request.headers.setdefault("Authorization", f"Bearer {_BEARER}")
        return await _async_send(self, request, *args, **kwargs)

    httpx.Client.send = send
    httpx.AsyncClient.send = async_send
