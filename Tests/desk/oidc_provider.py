#!/usr/bin/env python3
"""A test OpenID Connect provider for the support desk: discovery, JWKS, the authorization code flow with PKCE,
userinfo, and test-only endpoints that mint hostile tokens.

    .deps/venv/bin/python Tests/desk/oidc_provider.py PORT_FILE DIR --redirect-uri URI [--redirect-uri URI ...]
        [--client-id support-desk] [--client-secret desk-secret]

It serves HTTPS on a free port of 127.0.0.1 with a certificate for 127.0.0.1 and localhost signed by a test CA in
DIR (DIR/ca.pem: the desk's desk.oidc.ca_file; the CA is kept across restarts on the same DIR), writes the client's
secret to DIR/client_secret (no newline: the desk's desk.oidc.client_secret_file), and writes the port to PORT_FILE
last and atomically: once PORT_FILE exists, everything is ready. The issuer is https://127.0.0.1:PORT.

Users sign in on a form with a user name only (no password: it is a test provider). Their claims are USERS below.
Signing keys are new on every start: RSA 2048 "rsa-1" (signs ID and access tokens) and P-256 "ec-1".

Rules that the desk's tests lean on: PKCE S256 is required (plain refused); a code is single-use (a second
redemption is invalid_grant), lives 60 s and is bound to its client, redirect_uri and code_challenge; the token
endpoint takes client_secret_basic or client_secret_post (not both); email is in the tokens only when the scope
asked for email, name only for profile; groups always.

Test-only endpoints (only answered to a loopback peer):
    POST /test/mint    JSON {sub, groups, email, name, aud, iss, exp_offset_s, iat_offset_s, nbf_offset_s, nonce,
                       alg: RS256|ES256|none|HS256, kid, sign_with: provider|stranger, claims: {...}}: {"token"}.
                       Every field is optional (default: a valid access token for "ana"). "stranger" signs with a key
                       the JWKS does not publish, under the kid asked for (a forgery); HS256 with "provider" is keyed
                       with the provider's RSA public key PEM (the algorithm-confusion attack). A claim set to null
                       in "claims" is left out of the token.
    POST /test/rotate  JSON {drop_old: bool}: a new RSA key "rsa-N" signs from now on; the JWKS publishes it beside
                       the old ones unless drop_old. Answers {"kid"}.
    GET  /test/stats   counts of requests per endpoint, e.g. {"jwks": 2, "discovery": 1, "token": 1, ...}.

SIGTERM or SIGINT stop it cleanly (exit 0). One line per request on stderr.
"""

import argparse
import base64
import hashlib
import hmac
import html
import json
import os
import secrets
import signal
import ssl
import sys
import threading
import time
import traceback
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, RSAKey

sys.dont_write_bytecode = True  # its helpers beside it leave no __pycache__ in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_ca import server_certificate  # noqa: E402

USERS = {
    "ana": {"groups": ["support-agent"], "email": "ana@studio.test", "name": "Ana Agent"},
    "bob": {"groups": ["support-agent"], "email": "bob@studio.test", "name": "Bob Agent"},
    "sam": {"groups": ["support-agent"], "name": "Sam No-Email"},  # no email claim: the desk names sam by subject
    "rio": {"groups": ["support-agent"], "email": "rio@studio.test", "name": "Rio Agent"},  # spends its rates
    "vic": {"groups": ["support-viewer"], "email": "vic@studio.test", "name": "Vic Viewer"},
    "lee": {"groups": ["support-lead"], "email": "lee@studio.test", "name": "Lee Lead"},
    "lou": {"groups": ["support-lead"], "email": "lou@studio.test", "name": "Lou Lead"},
    "nobody": {"groups": [], "email": "nobody@studio.test", "name": "No Role"},
}
STATS_NAMES = {"/.well-known/openid-configuration": "discovery"}  # other paths count as "jwks", "test_mint", ...
CODE_TTL_S = 60
TOKEN_TTL_S = 3600
# RFC 7636: a verifier is 43 to 128 of these.
VERIFIER_CHARACTERS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def log(message):
    print(f"[oidc] {message}", file=sys.stderr, flush=True)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class OAuthError(Exception):
    """An error answered as RFC 6749's JSON error body (token endpoint) or as a redirect (authorize endpoint)."""

    def __init__(self, error, description, status=400):
        super().__init__(description)
        self.error, self.description, self.status = error, description, status


class Provider:
    """The provider's state: keys, client, codes. Handlers call it from many threads; the lock guards codes and keys."""

    def __init__(self, client_id, client_secret, redirect_uris):
        self.client_id, self.client_secret, self.redirect_uris = client_id, client_secret, set(redirect_uris)
        self.issuer = None  # set once the port is known
        self.lock = threading.Lock()
        self.codes = {}
        self.stats = Counter()
        self.rsa = RSAKey.generate_key(2048, parameters={"kid": "rsa-1", "use": "sig", "alg": "RS256"}, private=True)
        self.ec = ECKey.generate_key("P-256", parameters={"kid": "ec-1", "use": "sig", "alg": "ES256"}, private=True)
        self.published = [self.rsa, self.ec]
        self.rotations = 0
        self.strangers = {"RS256": RSAKey.generate_key(2048, private=True),
                          "ES256": ECKey.generate_key("P-256", private=True)}

    # --- keys -------------------------------------------------------------------------------------------------
    def jwks(self):
        with self.lock:
            return KeySet(list(self.published)).as_dict(private=False)

    def rotate(self, drop_old):
        with self.lock:
            self.rotations += 1
            kid = f"rsa-{self.rotations + 1}"
            key = RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"}, private=True)
            self.published = [key, self.ec] if drop_old else [key, *self.published]
            self.rsa = key
        return kid

    def sign(self, claims, alg="RS256", kid=None, sign_with="provider"):
        if alg == "none":  # by hand: an unsigned token, whatever a JOSE library allows or warns
            header = {"alg": "none", "typ": "JWT", **({"kid": kid} if kid else {})}
            return f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}."
        if alg == "HS256":  # by hand too: joserfc refuses a public key's PEM as an HMAC secret, rightly
            secret = (self.rsa.as_pem(private=False) if sign_with == "provider" else secrets.token_bytes(32))
            header = {"alg": "HS256", "typ": "JWT", "kid": kid or self.rsa.kid}
            signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
            signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
            return f"{signing_input}.{b64url(signature)}"
        if alg not in ("RS256", "ES256"):
            raise OAuthError("invalid_request", f"alg {alg} is not RS256, ES256, none or HS256")
        key = self.strangers[alg] if sign_with == "stranger" else (self.rsa if alg == "RS256" else self.ec)
        return jwt.encode({"alg": alg, "kid": kid or (self.rsa.kid if alg == "RS256" else self.ec.kid)}, claims, key)

    # --- the user's claims ------------------------------------------------------------------------------------
    def claims(self, user, asked, now, **extra):
        profile = USERS[user]
        claims = {"iss": self.issuer, "aud": self.client_id, "sub": user, "groups": profile["groups"],
                  "iat": now, "exp": now + TOKEN_TTL_S, **extra}
        if "email" in asked.split() and "email" in profile:
            claims.update(email=profile["email"], email_verified=True)
        if "profile" in asked.split():
            claims["name"] = profile["name"]
        return claims

    # --- the code flow ----------------------------------------------------------------------------------------
    def check_client_and_redirect(self, query):
        """What must hold before anything is redirected back: the redirect URI is only trusted once it matches."""
        if query.get("client_id") != self.client_id:
            raise OAuthError("invalid_client", "unknown client_id")
        if query.get("redirect_uri") not in self.redirect_uris:
            raise OAuthError("invalid_request", "redirect_uri is not registered for this client")

    def check_authorization_request(self, query):
        if query.get("response_type") != "code":
            raise OAuthError("unsupported_response_type", "only response_type=code")
        if "openid" not in query.get("scope", "").split():
            raise OAuthError("invalid_scope", "scope must include openid")
        if not query.get("code_challenge"):
            raise OAuthError("invalid_request", "code_challenge is required (PKCE)")
        if query.get("code_challenge_method") != "S256":
            raise OAuthError("invalid_request", "code_challenge_method must be S256")

    def issue_code(self, query, user):
        code = secrets.token_urlsafe(32)
        with self.lock:
            self.codes[code] = {"client_id": query["client_id"], "redirect_uri": query["redirect_uri"],
                                "challenge": query["code_challenge"], "nonce": query.get("nonce"),
                                "scope": query["scope"], "user": user, "expires": time.time() + CODE_TTL_S}
        return code

    def redeem(self, form, client_id):
        if form.get("grant_type") != "authorization_code":
            raise OAuthError("unsupported_grant_type", "only authorization_code")
        with self.lock:  # single use: popped by the first authenticated attempt, whether it succeeds or not
            grant = self.codes.pop(form.get("code", ""), None)
        if grant is None:
            raise OAuthError("invalid_grant", "unknown or already used code")
        if grant["expires"] < time.time():
            raise OAuthError("invalid_grant", "the code expired")
        if grant["client_id"] != client_id:
            raise OAuthError("invalid_grant", "the code was issued to another client")
        if form.get("redirect_uri") != grant["redirect_uri"]:
            raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request's")
        verifier = form.get("code_verifier", "")
        if not (43 <= len(verifier) <= 128 and set(verifier) <= VERIFIER_CHARACTERS):
            raise OAuthError("invalid_grant", "code_verifier missing or malformed")
        if not hmac.compare_digest(create_s256_code_challenge(verifier), grant["challenge"]):
            raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
        now = int(time.time())
        nonce = {"nonce": grant["nonce"]} if grant["nonce"] else {}
        id_token = self.sign(self.claims(grant["user"], grant["scope"], now, auth_time=now, **nonce))
        access = self.claims(grant["user"], grant["scope"], now, scope=grant["scope"], client_id=client_id,
                             jti=secrets.token_hex(8))
        return {"access_token": self.sign(access), "token_type": "Bearer", "expires_in": TOKEN_TTL_S,
                "id_token": id_token, "scope": grant["scope"]}

    def authenticate_client(self, headers, form):
        """RFC 6749 2.3.1: Basic (form-urlencoded id and secret) or the body's client_id and client_secret."""
        basic = headers.get("Authorization", "")
        if basic[:6].lower() == "basic " and "client_secret" in form:
            raise OAuthError("invalid_request", "more than one client authentication method")
        if basic[:6].lower() == "basic ":
            try:
                pair = base64.b64decode(basic[6:], validate=True).decode()
                client_id, secret = (urllib.parse.unquote_plus(p) for p in pair.split(":", 1))
            except ValueError:
                raise OAuthError("invalid_client", "malformed Basic credentials", 401)
        else:
            client_id, secret = form.get("client_id"), form.get("client_secret")
        if client_id != self.client_id or secret is None or not hmac.compare_digest(secret, self.client_secret):
            raise OAuthError("invalid_client", "client authentication failed", 401)
        return client_id

    def mint(self, body):
        now = int(time.time())
        sub = body.get("sub", "ana")
        claims = {"iss": body.get("iss", self.issuer), "aud": body.get("aud", self.client_id), "sub": sub,
                  "groups": body.get("groups", USERS.get(sub, {}).get("groups", [])),
                  "iat": now + int(body.get("iat_offset_s", 0)), "exp": now + int(body.get("exp_offset_s", 3600))}
        for name in ("email", "name", "nonce"):  # email and name default to the user's; no nonce unless asked
            value = body.get(name, USERS.get(sub, {}).get(name))
            if value is not None:
                claims[name] = value
        if "nbf_offset_s" in body:
            claims["nbf"] = now + int(body["nbf_offset_s"])
        for name, value in body.get("claims", {}).items():
            if value is None:
                claims.pop(name, None)
            else:
                claims[name] = value
        return self.sign(claims, body.get("alg", "RS256"), body.get("kid"), body.get("sign_with", "provider"))

    def discovery(self):
        return {
            "issuer": self.issuer, "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token", "jwks_uri": f"{self.issuer}/jwks",
            "userinfo_endpoint": f"{self.issuer}/userinfo", "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
            "code_challenge_methods_supported": ["S256"], "scopes_supported": ["openid", "profile", "email"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "claims_supported": ["iss", "aud", "sub", "exp", "iat", "nonce", "email", "name", "groups"],
        }


LOGIN_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Studio sign-in</title></head>
<body><h1>Studio sign-in (test provider)</h1>{error}
<form method="post" action="/authorize">{hidden}
<label for="username">User</label> <input name="username" id="username" autofocus>
<button type="submit" id="sign-in">Sign in</button></form></body></html>
"""


class Handler(BaseHTTPRequestHandler):
    server_version = "test-oidc"
    timeout = 10  # a client that stalls holds one thread for at most this long

    @property
    def provider(self):
        return self.server.provider

    def log_message(self, format, *args):
        log(f"{self.client_address[0]} {format % args}")

    def reply(self, status, body=b"", content_type="application/json", headers=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def oauth_error(self, error):
        headers = [("WWW-Authenticate", 'Basic realm="test-oidc"')] if error.status == 401 else []
        self.reply(error.status, {"error": error.error, "error_description": error.description}, headers=headers)

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > 65536:
            raise OAuthError("invalid_request", "body too large")
        return self.rfile.read(length)

    @staticmethod
    def single_values(text):
        parameters = urllib.parse.parse_qs(text, keep_blank_values=True)
        if any(len(values) > 1 for values in parameters.values()):  # RFC 6749 3.1: a parameter at most once
            raise OAuthError("invalid_request", "a parameter is repeated")
        return {name: values[0] for name, values in parameters.items()}

    def do_GET(self):
        self.answer()

    def do_POST(self):
        self.answer()

    def answer(self):
        path, _, query = self.path.partition("?")
        self.provider.stats[STATS_NAMES.get(path, path.strip("/").replace("/", "_"))] += 1
        if path.startswith("/test/") and self.client_address[0] != "127.0.0.1":
            return self.reply(403, {"error": "test endpoints answer loopback only"})
        route = (self.command, path)
        try:
            if route == ("GET", "/.well-known/openid-configuration"):
                self.reply(200, self.provider.discovery())
            elif route == ("GET", "/jwks"):
                self.reply(200, self.provider.jwks(), "application/jwk-set+json")
            elif route == ("GET", "/authorize"):
                self.authorize(self.single_values(query), None)
            elif route == ("POST", "/authorize"):
                form = self.single_values(self.read_body().decode())
                self.authorize(form, form.pop("username", ""))
            elif route == ("POST", "/token"):
                form = self.single_values(self.read_body().decode())
                client_id = self.provider.authenticate_client(self.headers, form)
                self.reply(200, self.provider.redeem(form, client_id), headers=[("Pragma", "no-cache")])
            elif route == ("GET", "/userinfo"):
                self.userinfo()
            elif route == ("GET", "/test/stats"):
                self.reply(200, dict(self.provider.stats))
            elif route == ("POST", "/test/mint"):
                self.reply(200, {"token": self.provider.mint(json.loads(self.read_body() or b"{}"))})
            elif route == ("POST", "/test/rotate"):
                drop_old = bool(json.loads(self.read_body() or b"{}").get("drop_old"))
                self.reply(200, {"kid": self.provider.rotate(drop_old)})
            else:
                self.reply(404, {"error": "not_found"})
        except OAuthError as error:
            self.oauth_error(error)
        except ValueError as error:  # input that does not decode: UTF-8, JSON, a number, a length
            self.reply(400, {"error": "invalid_request", "error_description": str(error)})
        except (TypeError, AttributeError) as error:
            if not path.startswith("/test/"):  # a bug of this provider: let handle_error show the traceback
                raise
            self.reply(400, {"error": "invalid_request", "error_description": f"a field of the wrong type: {error}"})

    def authorize(self, query, username):
        """GET shows the sign-in form; its POST (username set) redirects back with a code, or an error."""
        try:
            self.provider.check_client_and_redirect(query)
        except OAuthError as error:  # never redirect to an unverified URI: show the error here
            return self.reply(400, f"<p>{html.escape(error.error)}: {html.escape(error.description)}</p>",
                              "text/html; charset=utf-8")
        back = {"state": query["state"]} if "state" in query else {}
        try:
            self.provider.check_authorization_request(query)
        except OAuthError as error:
            return self.redirect(query["redirect_uri"], {"error": error.error,
                                                         "error_description": error.description, **back})
        if username is None or username not in USERS:
            hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
                             for k, v in query.items())
            error = f"<p id='error'>No such user: {html.escape(username)}</p>" if username else ""
            return self.reply(200, LOGIN_PAGE.format(hidden=hidden, error=error), "text/html; charset=utf-8")
        log(f"{username} signs in")
        self.redirect(query["redirect_uri"], {"code": self.provider.issue_code(query, username), **back})

    def redirect(self, uri, parameters):
        separator = "&" if "?" in uri else "?"
        self.reply(302, b"", "text/plain", [("Location", uri + separator + urllib.parse.urlencode(parameters))])

    def userinfo(self):
        token = self.headers.get("Authorization", "")[7:]
        try:
            keys = KeySet.import_key_set(self.provider.jwks())
            claims = jwt.decode(token, keys, algorithms=["RS256", "ES256"]).claims
            if claims.get("exp", 0) < time.time() or "scope" not in claims:  # an access token only
                raise ValueError("expired or not an access token")
        except Exception as error:  # any bad token is the same 401 to the caller
            return self.reply(401, {"error": "invalid_token", "error_description": str(error)},
                              headers=[("WWW-Authenticate", 'Bearer error="invalid_token"')])
        keep = ("sub", "email", "email_verified", "name", "groups")
        self.reply(200, {name: claims[name] for name in keep if name in claims})


class TLSServer(ThreadingHTTPServer):
    daemon_threads = True

    def finish_request(self, request, client_address):
        # The TLS handshake runs here, in the request's own thread, not in the accept loop, so that a client that
        # connects and stalls does not stop the others.
        request.settimeout(Handler.timeout)
        with self.tls.wrap_socket(request, server_side=True) as tls:
            self.RequestHandlerClass(tls, client_address, self)

    def handle_error(self, request, client_address):
        error = sys.exc_info()[1]
        if isinstance(error, OSError):  # a client that went away or refused the certificate: one line
            log(f"{client_address[0]} connection failed: {error!r}")
        else:  # a bug here: the whole traceback
            log(f"{client_address[0]} request failed:\n{traceback.format_exc()}")


def write_atomically(path, text):
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("port_file")
    parser.add_argument("directory", help="the test CA, the server's certificate and client_secret go here")
    parser.add_argument("--redirect-uri", action="append", required=True, help="registered; may be repeated")
    parser.add_argument("--client-id", default="support-desk")
    parser.add_argument("--client-secret", default="desk-secret")
    arguments = parser.parse_args()

    # A child spawned from Swift's cooperative pool inherits its blocked SIGTERM: unblock it, or SIGTERM never ends us.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    ca_pem, cert, key = server_certificate(arguments.directory)
    write_atomically(os.path.join(arguments.directory, "client_secret"), arguments.client_secret)

    provider = Provider(arguments.client_id, arguments.client_secret, arguments.redirect_uri)
    server = TLSServer(("127.0.0.1", 0), Handler)
    server.provider = provider
    server.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.tls.load_cert_chain(cert, key)
    port = server.server_address[1]
    provider.issuer = f"https://127.0.0.1:{port}"

    def stop(signum, _frame):
        log(f"signal {signum}: stopping")
        threading.Thread(target=server.shutdown).start()  # shutdown() waits for serve_forever: not on its thread

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    write_atomically(arguments.port_file, str(port))
    log(f"issuer {provider.issuer}, CA {ca_pem}, client {arguments.client_id}, "
        f"redirect URIs {sorted(provider.redirect_uris)}")
    server.serve_forever()
    server.server_close()
    log("stopped")


if __name__ == "__main__":
    main()
