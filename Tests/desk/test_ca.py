"""A throwaway test CA and a loopback server certificate, made with the openssl command line.

    from test_ca import server_certificate
    ca_pem, cert_pem, key_pem = server_certificate(directory)

The CA (ca.pem, ca.key) is made once per directory and kept, so that a server restarted on the same directory
(a provider restarted by a test) is still trusted by a client configured with ca.pem; the server's certificate is
made anew on every call. The server certificate names IP 127.0.0.1 and DNS localhost. Keys are P-256. The CA
carries the extensions OpenSSL 3 (libcurl) insists on: basicConstraints CA:TRUE and keyUsage keyCertSign, and
the leaf an authorityKeyIdentifier and serverAuth, so that strict verifiers accept the chain too.
"""

import os
import secrets
import subprocess

CA_NAME = "/CN=receipt-worker test CA"


def _openssl(*arguments):
    subprocess.run(["openssl", *arguments], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def certificate_authority(directory):
    """The CA in directory (made when absent): the paths of its certificate and key."""
    ca_pem, ca_key = os.path.join(directory, "ca.pem"), os.path.join(directory, "ca.key")
    if not (os.path.exists(ca_pem) and os.path.exists(ca_key)):
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", ca_key, "-out", ca_pem, "-days", "30", "-subj", CA_NAME,
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                 "-addext", "subjectKeyIdentifier=hash")
    return ca_pem, ca_key


def server_certificate(directory, name="server"):
    """A new certificate for 127.0.0.1 and localhost signed by directory's CA: (ca.pem, NAME.pem, NAME.key)."""
    os.makedirs(directory, exist_ok=True)
    ca_pem, ca_key = certificate_authority(directory)
    cert, key = os.path.join(directory, f"{name}.pem"), os.path.join(directory, f"{name}.key")
    request, extensions = os.path.join(directory, f"{name}.csr"), os.path.join(directory, f"{name}.ext")
    with open(extensions, "w", encoding="utf-8") as out:
        out.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                  "basicConstraints=critical,CA:FALSE\n"
                  "keyUsage=critical,digitalSignature\n"
                  "extendedKeyUsage=serverAuth\n"
                  "subjectKeyIdentifier=hash\n"
                  "authorityKeyIdentifier=keyid,issuer\n")
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1")
    _openssl("x509", "-req", "-in", request, "-CA", ca_pem, "-CAkey", ca_key, "-out", cert, "-days", "30",
             "-set_serial", "0x" + secrets.token_hex(16), "-extfile", extensions)
    os.remove(request)
    os.remove(extensions)
    return ca_pem, cert, key
