#!/usr/bin/env python3
"""Checks the test OpenID Connect provider (oidc_provider.py) on its own: starts it, reads discovery and the JWKS
through the test CA (with Python and with curl, as the desk's libcurl would), walks the authorization code flow
with PKCE as the desk will, verifies the ID token with the JWKS, and tries what must be refused. Where Debian's
chromium is installed, a real browser then signs in on the provider's form (Tests/desk/browser.py).

    .deps/venv/bin/python Tests/desk/check_provider.py

Prints one line per check and "N passed, N failed"; exits 1 when a check fails.
"""

import base64
import hashlib
import http.server
import json
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # browser.py and test_ca.py leave no __pycache__ in the work tree
REDIRECT = "http://127.0.0.1:1/desk/callback"  # never contacted: the flow stops at the redirect
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"), flush=True)


class Client:
    """HTTPS to the provider through the test CA, redirects not followed (the desk sees the 302 itself)."""

    def __init__(self, issuer, ca_file):
        self.issuer = issuer
        context = ssl.create_default_context(cafile=ca_file)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args):
                return None

        self.opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context), NoRedirect)

    def request(self, path, data=None, headers=None, method=None):
        """(status, headers, body) for path on the issuer, or an absolute URL."""
        url = path if path.startswith("https://") else self.issuer + path
        if isinstance(data, dict):
            data = urllib.parse.urlencode(data).encode()
        request = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
        try:
            with self.opener.open(request, timeout=10) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()

    def json(self, path, data=None, headers=None):
        status, _, body = self.request(path, data, headers)
        return status, json.loads(body or b"null")


def pkce():
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def basic(client_id, secret):
    pair = f"{urllib.parse.quote_plus(client_id)}:{urllib.parse.quote_plus(secret)}"
    return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}


def sign_in(client, user, challenge, method="S256", redirect_uri=REDIRECT, scope="openid profile email"):
    """Walks the authorize page as a browser would: GET the form, POST its fields with the user name.
    Returns (status, Location's query as a dict, body)."""
    query = {"response_type": "code", "client_id": "support-desk", "redirect_uri": redirect_uri, "scope": scope,
             "state": "st-" + user, "nonce": "n-" + user, "code_challenge": challenge,
             "code_challenge_method": method}
    status, headers, page = client.request("/authorize?" + urllib.parse.urlencode(query))
    if status != 200:
        return status, dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(headers.get("Location", "")).query)), page
    form = dict(re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', page.decode()))
    form = {name: value.replace("&amp;", "&") for name, value in form.items()}
    form["username"] = user
    status, headers, body = client.request("/authorize", form)
    location = headers.get("Location", "")
    return status, dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(location).query)), body


class Landing:
    """The desk's callback as a browser reaches it: records the query it was redirected back with."""

    def __init__(self):
        queries = self.queries = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                queries.append(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.callback = f"http://127.0.0.1:{self.server.server_address[1]}/desk/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def check_browser(issuer, landing):
    """Chromium signs in on the provider's form (#username, #sign-in) and lands on the callback with a code."""
    from browser import start_chromium  # selenium only when there is a browser
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    query = {"response_type": "code", "client_id": "support-desk", "redirect_uri": landing.callback,
             "scope": "openid profile email", "state": "browser-state", "nonce": "browser-nonce",
             "code_challenge": pkce()[1], "code_challenge_method": "S256"}
    driver = start_chromium()
    try:
        driver.get(issuer + "/authorize?" + urllib.parse.urlencode(query))
        driver.find_element(By.ID, "username").send_keys("lee")
        driver.find_element(By.ID, "sign-in").click()
        WebDriverWait(driver, 10).until(lambda _: landing.queries)
    finally:
        driver.quit()
    back = landing.queries[0] if landing.queries else {}
    check("a browser signs in on the form and lands with a code and the state",
          back.get("state") == "browser-state" and len(back.get("code", "")) > 20, back)


def main():
    directory = tempfile.mkdtemp(prefix="oidc-check-")
    port_file = os.path.join(directory, "port")
    landing = Landing()
    process = subprocess.Popen([sys.executable, os.path.join(HERE, "oidc_provider.py"), port_file,
                                os.path.join(directory, "tls"), "--redirect-uri", REDIRECT,
                                "--redirect-uri", landing.callback],
                               stderr=open(os.path.join(directory, "provider.log"), "w"))
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        check("the provider writes its port", os.path.exists(port_file), "see provider.log")
        if not os.path.exists(port_file):
            return
        port = int(open(port_file).read())
        run_checks(directory, port)
        if os.path.exists("/usr/bin/chromium"):
            check_browser(f"https://127.0.0.1:{port}", landing)
        else:
            print("skip the browser's sign-in: no /usr/bin/chromium (bash scripts/setup.sh)")
        process.send_signal(signal.SIGTERM)
        check("SIGTERM stops it cleanly", process.wait(timeout=10) == 0, process.returncode)
    finally:
        landing.server.shutdown()
        if process.poll() is None:
            process.kill()
        if all(results):
            shutil.rmtree(directory)
        else:
            print(f"kept {directory} (provider.log)")


def run_checks(directory, port):
    issuer, ca_file = f"https://127.0.0.1:{port}", os.path.join(directory, "tls", "ca.pem")
    client = Client(issuer, ca_file)
    with open(os.path.join(directory, "tls", "client_secret")) as file:
        secret = file.read()
    check("the client secret file holds desk-secret, no newline", secret == "desk-secret", repr(secret))

    status, discovery = client.json("/.well-known/openid-configuration")
    check("discovery answers", status == 200, status)
    check("discovery names the issuer and endpoints",
          discovery["issuer"] == issuer and discovery["token_endpoint"] == issuer + "/token"
          and discovery["jwks_uri"] == issuer + "/jwks", discovery)
    check("discovery: S256 only, RS256 and ES256", discovery["code_challenge_methods_supported"] == ["S256"]
          and discovery["id_token_signing_alg_values_supported"] == ["RS256", "ES256"], discovery)
    if shutil.which("curl"):  # libcurl, as the desk will, trusts the chain with the CA file alone
        curl = subprocess.run(["curl", "-sS", "--fail", "--cacert", ca_file, discovery["jwks_uri"]],
                              capture_output=True, text=True)
        check("curl --cacert reads the JWKS", curl.returncode == 0, curl.stderr)
        curl = subprocess.run(["curl", "-sS", "--fail", discovery["jwks_uri"]], capture_output=True, text=True)
        check("curl without the CA refuses the provider", curl.returncode != 0, curl.stdout)
    status, jwks = client.json("/jwks")
    check("JWKS: rsa-1 (RSA) and ec-1 (P-256), public only",
          sorted((k["kid"], k["kty"]) for k in jwks["keys"]) == [("ec-1", "EC"), ("rsa-1", "RSA")]
          and not any("d" in k for k in jwks["keys"]), jwks)
    keys = KeySet.import_key_set(jwks)

    # The code flow, as the desk does it: PKCE S256, state and nonce, client_secret_basic.
    verifier, challenge = pkce()
    status, back, _ = sign_in(client, "ana", challenge)
    check("sign-in redirects back with a code and the state", status == 302 and back.get("state") == "st-ana"
          and "code" in back, (status, back))
    exchange = {"grant_type": "authorization_code", "code": back.get("code", ""), "redirect_uri": REDIRECT,
                "code_verifier": verifier}
    status, tokens = client.json("/token", exchange, basic("support-desk", "desk-secret"))
    check("the token endpoint answers (client_secret_basic)", status == 200, tokens)
    if status != 200:
        return
    check("Bearer, expires_in 3600", tokens["token_type"] == "Bearer" and tokens["expires_in"] == 3600, tokens)
    id_token = jwt.decode(tokens["id_token"], keys, algorithms=["RS256", "ES256"])
    check("the ID token is RS256 under rsa-1", id_token.header["alg"] == "RS256"
          and id_token.header["kid"] == "rsa-1", id_token.header)
    claims = id_token.claims
    try:
        JWTClaimsRegistry(iss={"essential": True, "value": issuer}, aud={"essential": True, "value": "support-desk"},
                          exp={"essential": True}, nonce={"essential": True, "value": "n-ana"}).validate(claims)
        valid = True
    except JoseError as error:
        valid = error
    check("the ID token's iss, aud, exp and nonce hold", valid is True, valid)
    check("the ID token names ana, her email and groups", claims["sub"] == "ana"
          and claims["email"] == "ana@studio.test" and claims["groups"] == ["support-agent"], claims)
    check("the ID token lives an hour", claims["exp"] - claims["iat"] == 3600, claims)
    access = jwt.decode(tokens["access_token"], keys, algorithms=["RS256", "ES256"]).claims
    check("the access token is a JWT for the client", access["aud"] == "support-desk" and access["sub"] == "ana"
          and access["groups"] == ["support-agent"], access)
    status, info = client.json("/userinfo", headers={"Authorization": "Bearer " + tokens["access_token"]})
    check("userinfo answers the access token", status == 200 and info["email"] == "ana@studio.test", info)
    status, _ = client.json("/userinfo", headers={"Authorization": "Bearer " + tokens["id_token"]})
    check("userinfo refuses an ID token", status == 401, status)

    status, error = client.json("/token", exchange, basic("support-desk", "desk-secret"))
    check("a code is single-use", status == 400 and error["error"] == "invalid_grant", error)

    # client_secret_post, and each way the exchange must fail.
    def fresh_code(user="vic", scope="openid profile email"):
        verifier, challenge = pkce()
        _, back, _ = sign_in(client, user, challenge, scope=scope)
        return {"grant_type": "authorization_code", "code": back.get("code", ""), "redirect_uri": REDIRECT,
                "code_verifier": verifier}

    status, tokens = client.json("/token", {**fresh_code(), "client_id": "support-desk",
                                            "client_secret": "desk-secret"})
    check("client_secret_post works", status == 200 and "id_token" in tokens, tokens)
    claims = jwt.decode(tokens["id_token"], keys).claims
    check("vic is a viewer", claims.get("groups") == ["support-viewer"], claims)
    status, tokens = client.json("/token", fresh_code("ana", "openid"), basic("support-desk", "desk-secret"))
    claims = jwt.decode(tokens["id_token"], keys).claims
    check("without the email scope, no email claim", "email" not in claims and "groups" in claims, claims)
    exchange = fresh_code()
    status, error = client.json("/token", exchange, basic("support-desk", "wrong"))
    check("a wrong secret is 401 invalid_client", status == 401 and error["error"] == "invalid_client", error)
    status, _ = client.json("/token", exchange, basic("support-desk", "desk-secret"))
    check("a failed client authentication does not burn the code", status == 200, status)
    status, error = client.json("/token", {**fresh_code(), "code_verifier": pkce()[0]},
                                basic("support-desk", "desk-secret"))
    check("a wrong code_verifier is invalid_grant", status == 400 and error["error"] == "invalid_grant", error)
    status, error = client.json("/token", {**fresh_code(), "redirect_uri": REDIRECT + "x"},
                                basic("support-desk", "desk-secret"))
    check("another redirect_uri is invalid_grant", status == 400 and error["error"] == "invalid_grant", error)
    status, back, _ = sign_in(client, "ana", pkce()[0], method="plain")
    check("PKCE plain is refused (an error redirect)", status == 302 and back.get("error") == "invalid_request"
          and back.get("state") == "st-ana" and "code" not in back, back)
    status, headers, _ = client.request("/authorize?" + urllib.parse.urlencode(
        {"response_type": "code", "client_id": "support-desk", "redirect_uri": "https://evil.test/cb",
         "scope": "openid", "code_challenge": pkce()[1], "code_challenge_method": "S256"}))
    check("an unregistered redirect_uri is answered 400, never redirected", status == 400
          and "Location" not in headers, status)
    status, _, page = sign_in(client, "mallory", pkce()[1])
    check("an unknown user is shown the form again", status == 200 and b"No such user" in page, status)

    # Minted tokens for hostile cases.
    def mint(**fields):
        status, body = client.json("/test/mint", json.dumps(fields).encode(), {"Content-Type": "application/json"})
        assert status == 200, body
        return body["token"]

    def verifies(token):
        try:
            jwt.decode(token, keys, algorithms=["RS256", "ES256"])
            return True
        except (JoseError, ValueError):
            return False

    claims = jwt.decode(mint(sub="lee"), keys).claims
    check("mint: a valid token for lee by default", claims["groups"] == ["support-lead"]
          and claims["aud"] == "support-desk" and claims["iss"] == issuer, claims)
    token = mint(alg="ES256", exp_offset_s=-120, aud="someone-else")
    header = jwt.decode(token, keys, algorithms=["ES256"]).header
    claims = jwt.decode(token, keys, algorithms=["ES256"]).claims
    check("mint: ES256 under ec-1, expired, another audience", header["kid"] == "ec-1"
          and claims["exp"] < time.time() and claims["aud"] == "someone-else", (header, claims))
    check("mint: a stranger's RS256 under rsa-1 does not verify", not verifies(mint(sign_with="stranger")))
    check("mint: a stranger's ES256 under ec-1 does not verify",
          not verifies(mint(alg="ES256", sign_with="stranger")))
    none_token = mint(alg="none")
    check("mint: alg none has an empty signature", none_token.endswith(".")
          and json.loads(base64.urlsafe_b64decode(none_token.split(".")[0] + "=="))["alg"] == "none", none_token)
    check("mint: HS256 (keyed with the RSA public key) is not accepted as RS256/ES256",
          not verifies(mint(alg="HS256")))
    claims = jwt.decode(mint(claims={"exp": None, "groups": "support-agent"}), keys).claims
    check("mint: a claim set to null is left out, groups may be one string",
          "exp" not in claims and claims["groups"] == "support-agent", claims)

    status, rotated = client.json("/test/rotate", b"{}")
    status, jwks = client.json("/jwks")
    kids = [k["kid"] for k in jwks["keys"]]
    header = jwt.decode(mint(), KeySet.import_key_set(jwks)).header
    check("rotate: a new key signs, the old one stays published", rotated["kid"] == "rsa-2"
          and {"rsa-1", "rsa-2", "ec-1"} == set(kids) and header["kid"] == "rsa-2", (rotated, kids, header))
    status, stats = client.json("/test/stats")
    check("stats count discovery and JWKS fetches", stats.get("discovery") == 1 and stats.get("jwks", 0) >= 2, stats)

    status, error = client.json("/token", b"grant_type=authorization_code&code=a&code=b",
                                basic("support-desk", "desk-secret"))
    check("a repeated parameter is invalid_request", status == 400 and error["error"] == "invalid_request", error)
    status, error = client.json("/token", b"\xff\xfe", basic("support-desk", "desk-secret"))
    check("a body that is not UTF-8 is 400", status == 400 and error["error"] == "invalid_request", error)


if __name__ == "__main__":
    main()
    failed = results.count(False)
    print(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed or not results else 0)
