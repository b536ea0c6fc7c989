#!/usr/bin/env python3
"""The SBOM of a release (SPDX 2.3, JSON) on standard output: what the archive holds (receipt-worker, the Swift
runtime linked into it, librdkafka beside it) and what it needs of the system (Debian 12's runtime packages, which
Debian updates). Written by scripts/release.sh:

    sbom.py VERSION ARCHIVE_NAME ARCHIVE_PATH DEBIAN_PACKAGE...
"""
import datetime
import hashlib
import json
import re
import subprocess
import sys

LIBRDKAFKA_VERSION = "2.8.0"
# scripts/build-librdkafka.sh pins the same source tarball.
LIBRDKAFKA_SOURCE_SHA256 = "5bd1c46f63265f31c6bfcedcde78703f77d28238eadf23821c2b43fc30be3e25"


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def swift_version():
    text = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout
    found = re.search(r"Swift version (\S+)", text)
    return found.group(1) if found else "NOASSERTION"


def main(version, archive_name, archive_path, debian_packages):
    archive_sha = sha256(archive_path)
    swift = swift_version()
    product = {
        "SPDXID": "SPDXRef-Package-receipt-worker", "name": "receipt-worker", "versionInfo": version,
        "downloadLocation": "NOASSERTION", "packageFileName": archive_name, "filesAnalyzed": False,
        "checksums": [{"algorithm": "SHA256", "checksumValue": archive_sha}],
        "licenseConcluded": "Apache-2.0", "licenseDeclared": "Apache-2.0", "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "APPLICATION",
        "comment": "bin/receipt-worker, with lib/librdkafka.so.1 beside it (its run path is $ORIGIN/../lib)",
    }
    runtime = {
        "SPDXID": "SPDXRef-Package-swift-runtime", "name": "swift-runtime", "versionInfo": swift,
        "downloadLocation": "https://www.swift.org/install/linux/", "filesAnalyzed": False,
        "licenseConcluded": "Apache-2.0 WITH Swift-exception", "licenseDeclared": "Apache-2.0 WITH Swift-exception",
        "copyrightText": "NOASSERTION", "primaryPackagePurpose": "LIBRARY",
        "comment": "the Swift standard library, Foundation, Dispatch and Synchronization, linked into the binary "
                   "(--static-swift-stdlib)",
    }
    librdkafka = {
        "SPDXID": "SPDXRef-Package-librdkafka", "name": "librdkafka", "versionInfo": LIBRDKAFKA_VERSION,
        "downloadLocation": "http://deb.debian.org/debian/pool/main/libr/librdkafka/"
                            f"librdkafka_{LIBRDKAFKA_VERSION}.orig.tar.gz",
        "filesAnalyzed": False, "licenseConcluded": "BSD-2-Clause", "licenseDeclared": "BSD-2-Clause",
        "copyrightText": "NOASSERTION", "primaryPackagePurpose": "LIBRARY",
        "checksums": [{"algorithm": "SHA256", "checksumValue": LIBRDKAFKA_SOURCE_SHA256}],
        "comment": "built from Debian's source tarball (this checksum) by scripts/build-librdkafka.sh; "
                   "lib/librdkafka.so.1 in the archive",
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": f"pkg:generic/librdkafka@{LIBRDKAFKA_VERSION}"}],
    }
    system = [{
        "SPDXID": f"SPDXRef-Package-debian-{name.replace('.', '-')}", "name": name, "versionInfo": "NOASSERTION",
        "supplier": "Organization: Debian", "downloadLocation": "NOASSERTION", "filesAnalyzed": False,
        "licenseConcluded": "NOASSERTION", "licenseDeclared": "NOASSERTION", "copyrightText": "NOASSERTION",
        "comment": "not in the archive: installed on the host from Debian 12 (bookworm), which keeps it patched",
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": f"pkg:deb/debian/{name}?distro=debian-12"}],
    } for name in debian_packages]
    relationships = [
        {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
         "relatedSpdxElement": product["SPDXID"]},
        {"spdxElementId": product["SPDXID"], "relationshipType": "CONTAINS", "relatedSpdxElement": runtime["SPDXID"]},
        {"spdxElementId": product["SPDXID"], "relationshipType": "CONTAINS",
         "relatedSpdxElement": librdkafka["SPDXID"]},
    ] + [{"spdxElementId": product["SPDXID"], "relationshipType": "DEPENDS_ON", "relatedSpdxElement": p["SPDXID"]}
         for p in system]
    document = {
        "spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"receipt-worker-{version}",
        "documentNamespace": f"https://receipt-worker.example/spdx/receipt-worker-{version}-{archive_sha[:16]}",
        "creationInfo": {
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "creators": ["Tool: receipt-worker scripts/release.sh"],
        },
        "documentDescribes": [product["SPDXID"]],
        "packages": [product, runtime, librdkafka] + system,
        "relationships": relationships,
    }
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
