"""Schemathesis hooks for shardmart's API (TestSchemathesis in internal/httpapi).

Authentication: before each test case the session is checked and, once a generated logout or
login has revoked its token, replaced, so that no case after it runs unauthenticated. With
SHARDMART_FUZZ_EMAIL and SHARDMART_FUZZ_PASSWORD set, the session is logged in as that user.

Formats: `cursor` (the document's Cursor parameter) is a next_cursor this server issued for the
list, which no generator can invent: the first page ("") stands for it.
"""

import os

import requests
import schemathesis
from hypothesis import strategies as st

schemathesis.openapi.format("cursor", st.just(""))


@schemathesis.auth(refresh_interval=None)
class FreshSession:
    token = None

    def get(self, case, ctx):
        base = os.environ["SHARDMART_FUZZ_URL"]
        if self.token is not None:
            # Reused while it still works: a login costs a bcrypt hash.
            r = requests.get(base + "/v1/cart", headers={"Authorization": "Bearer " + self.token}, timeout=30)
            if r.status_code == 200:
                return self.token
        self.token = self.start(base)
        return self.token

    def start(self, base):
        r = requests.post(base + "/v1/sessions", timeout=30)
        r.raise_for_status()
        token = r.json()["token"]
        email = os.environ.get("SHARDMART_FUZZ_EMAIL")
        if email:
            r = requests.post(
                base + "/v1/login",
                json={"email": email, "password": os.environ["SHARDMART_FUZZ_PASSWORD"]},
                headers={"Authorization": "Bearer " + token},
                timeout=30,
            )
            r.raise_for_status()
            token = r.json()["token"]
        return token

    def set(self, case, data, ctx):
        case.headers = case.headers or {}
        case.headers["Authorization"] = "Bearer " + data
