#!/usr/bin/env bash
# A throwaway PKI shaped like Apple's signing chain, for the revocation tests (Tests/AppleClientTests/
# RevocationCheckTests.swift): a root; an intermediate with Apple's WWDR OID whose OCSP responder (run by the root)
# is on ROOT_PORT; leaves with Apple's receipt-signing OID whose responders are on the ports named below; the two
# responders' index files. Everything is EC P-256, made fresh in DIR with the openssl command line.
#
#   make-pki.sh DIR ROOT_PORT LEAF_PORT DEAD_PORT SLOW_PORT FORGED_PORT
#
# Leaves: good, revoked and unknown (not in the index) ask LEAF_PORT; unreachable asks DEAD_PORT (nothing
# listens); slow asks SLOW_PORT (a server that never answers); forged asks FORGED_PORT (a responder signing with a
# key nobody authorised).
set -euo pipefail
dir=$1 root_port=$2 leaf_port=$3 dead_port=$4 slow_port=$5 forged_port=$6
mkdir -p "$dir"
cd "$dir"

key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key" 2>/dev/null; }
conf() {  # conf NAME EXTENSIONS
    printf '[req]\ndistinguished_name=dn\n[dn]\n[ext]\n%s\n' "$2" > "$1.cnf"
}

key root
conf root $'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash'
openssl req -new -x509 -key root.key -subj "/CN=Test Root CA" -days 3650 -config root.cnf -extensions ext \
    -out root.pem 2>/dev/null

key intermediate
conf intermediate "basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign,cRLSign
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
1.2.840.113635.100.6.2.1=ASN1:NULL
authorityInfoAccess=OCSP;URI:http://127.0.0.1:$root_port/"
openssl req -new -key intermediate.key -subj "/CN=Test WWDR Intermediate" -config intermediate.cnf \
    -out intermediate.csr 2>/dev/null
openssl x509 -req -in intermediate.csr -CA root.pem -CAkey root.key -set_serial 0x1001 -days 3650 \
    -extfile intermediate.cnf -extensions ext -out intermediate.pem 2>/dev/null

serial=0x2000
for leaf in good revoked unknown unreachable slow forged; do
    case $leaf in
        unreachable) port=$dead_port ;;
        slow) port=$slow_port ;;
        forged) port=$forged_port ;;
        *) port=$leaf_port ;;
    esac
    serial=$((serial + 1))
    key "$leaf"
    conf "$leaf" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
1.2.840.113635.100.6.11.1=ASN1:NULL
authorityInfoAccess=OCSP;URI:http://127.0.0.1:$port/"
    openssl req -new -key "$leaf.key" -subj "/CN=Test Signing $leaf" -config "$leaf.cnf" -out "$leaf.csr" 2>/dev/null
    openssl x509 -req -in "$leaf.csr" -CA intermediate.pem -CAkey intermediate.key -set_serial "$serial" \
        -days 3650 -extfile "$leaf.cnf" -extensions ext -out "$leaf.pem" 2>/dev/null
    openssl x509 -in "$leaf.pem" -outform der -out "$leaf.der"
done
openssl x509 -in root.pem -outform der -out root.der
openssl x509 -in intermediate.pem -outform der -out intermediate.der

# The responders' indexes (openssl ca's format): V valid, R revoked (with its date); a serial not listed is unknown.
line() {  # line STATUS CERT [REVOKED_AT]
    local expiry serial subject
    expiry=$(date -u -d "$(openssl x509 -in "$2" -noout -enddate | cut -d= -f2)" +%y%m%d%H%M%SZ)
    serial=$(openssl x509 -in "$2" -noout -serial | cut -d= -f2)
    subject=$(openssl x509 -in "$2" -noout -subject -nameopt compat | sed 's/^subject=//')
    printf '%s\t%s\t%s\t%s\tunknown\t%s\n' "$1" "$expiry" "${3:-}" "$serial" "$subject"
}
yesterday=$(date -u -d yesterday +%y%m%d%H%M%SZ)
{
    line V good.pem
    line R revoked.pem "$yesterday"
    line V unreachable.pem
    line V slow.pem
    line V forged.pem
} > leaves.index
line V intermediate.pem > intermediates.index

# A responder nobody authorised: a key and certificate of its own.
key stranger
openssl req -new -x509 -key stranger.key -subj "/CN=Not a responder" -days 3650 -out stranger.pem 2>/dev/null
