#!/usr/bin/env bash
# Every Secret a deployment mounts or KEDA reads, made from a directory of files (one value per file):
#
#   deploy/kubernetes/create-secrets.sh DIR                        # prints the Secrets as YAML
#   deploy/kubernetes/create-secrets.sh DIR | kubectl apply -f -   # creates them, or updates them (then restart the pods)
#   deploy/kubernetes/create-secrets.sh DIR deploy/overlays/app-review | kubectl apply -f -   # another deployment's
#
# The second argument is the kustomization to make them for (default: deploy/kubernetes). It is rendered
# (`kubectl kustomize`, offline) and read for what the Secrets depend on, so nothing is written twice: the
# namespace (its Namespace), which Secrets its workloads mount (the support desk's only with components/desk), the
# brokers' settings (kafka.* of its configuration) and KEDA's Kafka user (the TriggerAuthentication's annotation
# receipt-worker/kafka-user). Only the files of the Secrets it makes are needed.
#
# It runs `kubectl create secret generic ... --dry-run=client -o yaml`, which asks no cluster. The output holds
# the secrets (base64): pipe it to kubectl apply, or to your sealing tool (kubeseal, ...), never to a file in Git.
# It changes nothing but this: when the desk is deployed and DIR has no desk-session-key, it makes one (openssl
# rand -hex 32, mode 0600) and says so; later runs reuse it (a new key would end every console session).
# The test command runs this script on stub files for every combination of components (Tests/deploy/check_deploy.py)
# and checks that every Secret and key a workload or KEDA reads is made here, and that no workload mounts a key it
# does not read.
#
# DIR holds (deploy/README.md, "Secrets"):
#   apple-shared-secret       the app-specific shared secret (App Store Connect)
#   app-store-key.p8          the In-App Purchase key whose id is apple.api.key_id
#   ledger-url                the workers' PostgreSQL URL: postgresql://receipt_worker_app:PASSWORD@HOST:5432/DB
#   ledger-migrate-url        the schema owner's URL, direct to PostgreSQL (not PgBouncer): only the migrate Job
#   kafka-password            the workers' Kafka user's password (receipt-worker)
#   receiver-kafka-password   the receivers' Kafka user's password (receipt-worker-receiver)
#   keda-kafka-password       KEDA's Kafka user's password (receipt-worker-keda)
#   operator-kafka-password   the operator's Kafka user's password (receipt-worker-operator)
#   kafka-ca.crt              PEM of the CA that signed the brokers' certificates; needed while the configuration
#                             sets kafka.ssl.ca.location (a private CA, such as Strimzi's)
#   postgres-ca.crt           PEM of the CA that signed PostgreSQL's certificate; needed while the configuration
#                             sets ledger.ssl_root_cert_file (TLS to the ledger with sslmode=verify-full)
# and with the support desk (components/desk):
#   desk-ledger-url           the support desk's PostgreSQL URL: postgresql://receipt_worker_desk:PASSWORD@HOST:5432/DB
#   desk-kafka-password       the support desk's Kafka user's password (receipt-worker-desk)
#   desk-oidc-client-secret   the desk's client secret at the studio's OpenID Connect provider
#   desk-session-key          32 random bytes as 64 hex digits, sealing the console's sessions: made here when absent
#   desk-erasure-key          32 random bytes as 64 hex digits, keying an erased player's pseudonym
#                             (privacy.erasure_key_file): made here when absent; keep it as long as the ledger
#
# The Secrets, one per reader, each with only what that reader uses:
#   receipt-worker             the workers (deployment.yaml): shared secret, key, ledger-url, Kafka password, CA
#   receipt-worker-migrate     the migrate Job (migrate-job.yaml): ledger-migrate-url only
#   receipt-worker-receiver    the receivers (receiver.yaml): their Kafka password and the CA only
#   receipt-worker-operator    the operator's pod (operator.yaml): the key, the workers' ledger-url, its own Kafka
#                              password, the CA
#   receipt-worker-kafka-keda  KEDA's TriggerAuthentication (keda-scaledobject.yaml): sasl, username, password,
#                              tls, ca.crt; sasl and tls follow the configuration's kafka.* settings
#   receipt-worker-desk        the support desk (components/desk): the App Store Connect key, its ledger-url, its
#                              Kafka password and the CA, its OIDC client secret, its session and erasure keys
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() { echo "create-secrets.sh: $*" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] && [ -d "$1" ] ||
    die "usage: create-secrets.sh DIR [KUSTOMIZATION] (DIR: a directory of files, see the top of this script)"
dir="$(cd "$1" && pwd)"
kustomization="${2:-$here}"
[ -f "$kustomization/kustomization.yaml" ] || die "$kustomization has no kustomization.yaml"
command -v kubectl >/dev/null || die "kubectl is not installed (it renders the kustomization and builds the Secrets, offline)"

rendered="$(kubectl kustomize "$kustomization")" || die "kubectl kustomize $kustomization failed"

# The namespace: the rendered Namespace's name (the kustomization's namespace: field, written there only).
# (Here-strings, not pipes: a reader that stops early would end the writer with SIGPIPE, which pipefail reports.)
namespace="$(awk '/^---$/ { inside = 0 } /^kind: Namespace$/ { inside = 1 } inside && /^  name: / { print $2; exit }' \
    <<<"$rendered")"
[ -n "$namespace" ] || die "$kustomization renders no Namespace"
# Whether the rendered workloads mount a Secret (the desk's only with components/desk).
mounts() { grep -Eq "^ +secretName: $1\$" <<<"$rendered"; }
# A property of the rendered configuration (the first properties file that sets it; they agree on kafka.*).
property() { sed -n "s/^ *$1[[:space:]]*=[[:space:]]*//p" <<<"$rendered" | sed -n 1p; }
# KEDA's Kafka user, as the TriggerAuthentication names it.
keda_user="$(sed -n 's/^ *receipt-worker\/kafka-user: *//p' <<<"$rendered" | sed -n 1p)"
[ -n "$keda_user" ] || die "$kustomization's TriggerAuthentication names no Kafka user (annotation receipt-worker/kafka-user)"

# The brokers' CA is needed while the configuration names one.
ca_used="$(property kafka.ssl.ca.location)"
# PostgreSQL's CA likewise, in every Secret that holds a ledger URL.
pg_ca_used="$(property ledger.ssl_root_cert_file)"
desk=""
if mounts receipt-worker-desk; then desk=yes; fi
# The console's session key: made once, then kept in DIR (a new one signs every agent out).
for key in ${desk:+desk-session-key desk-erasure-key}; do
    [ -e "$dir/$key" ] && continue
    command -v openssl >/dev/null || die "openssl is not installed (it makes $key)"
    (umask 077 && openssl rand -hex 32 | tr -d '\n' >"$dir/$key")
    echo "create-secrets.sh: made $dir/$key (openssl rand -hex 32); keep it: the next run reuses it" >&2
done

for name in apple-shared-secret app-store-key.p8 ledger-url ledger-migrate-url kafka-password \
    receiver-kafka-password keda-kafka-password operator-kafka-password ${ca_used:+kafka-ca.crt} \
    ${pg_ca_used:+postgres-ca.crt} \
    ${desk:+desk-ledger-url desk-kafka-password desk-oidc-client-secret desk-session-key desk-erasure-key}; do
    [ -s "$dir/$name" ] || die "$dir/$name is missing or empty"
done
for key in ${desk:+desk-session-key desk-erasure-key}; do
    grep -Eqx '[0-9a-fA-F]{64}' "$dir/$key" || die "$dir/$key must be 64 hex digits on one line (openssl rand -hex 32)"
done

# The owner's URL must not reach the workers: the workers' role can then create and drop nothing.
if cmp -s "$dir/ledger-url" "$dir/ledger-migrate-url"; then
    die "ledger-url and ledger-migrate-url are the same: the workers must not connect as the schema's owner"
fi
# The desk's role is neither: it may credit, not migrate, and its grants are not the workers'.
if [ -n "$desk" ] && { cmp -s "$dir/desk-ledger-url" "$dir/ledger-url" || cmp -s "$dir/desk-ledger-url" "$dir/ledger-migrate-url"; }; then
    die "desk-ledger-url is the workers' or the owner's URL: the desk connects as a role of its own (receipt_worker_desk)"
fi
passwords=(kafka-password receiver-kafka-password keda-kafka-password operator-kafka-password ${desk:+desk-kafka-password})
for one in "${passwords[@]}"; do
    for other in "${passwords[@]}"; do
        if [ "$one" \< "$other" ] && cmp -s "$dir/$one" "$dir/$other"; then
            die "$one and $other are the same: the workers, the receivers, KEDA, the operator and the desk each have a Kafka user of their own"
        fi
    done
done

# The brokers' CA: in every Kafka client's Secret.
ca=()
keda_ca=()
if [ -n "$ca_used" ]; then
    ca=(--from-file=kafka-ca.crt="$dir/kafka-ca.crt")
    keda_ca=(--from-file=ca.crt="$dir/kafka-ca.crt")
fi
pg_ca=()
if [ -n "$pg_ca_used" ]; then
    pg_ca=(--from-file=postgres-ca.crt="$dir/postgres-ca.crt")
fi

# KEDA's Kafka scaler settings, from the workers' own.
protocol="$(property kafka.security.protocol)"
case "$protocol" in
    SSL | SASL_SSL) tls=enable ;;
    PLAINTEXT | SASL_PLAINTEXT | "") tls=disable ;;
    *) die "kafka.security.protocol=$protocol is not one KEDA's Kafka scaler knows" ;;
esac
case "$protocol:$(property kafka.sasl.mechanisms)" in
    SASL_*:SCRAM-SHA-512) sasl=scram_sha512 ;;
    SASL_*:SCRAM-SHA-256) sasl=scram_sha256 ;;
    SASL_*:PLAIN) sasl=plaintext ;;
    SASL_*:*) die "kafka.sasl.mechanisms=$(property kafka.sasl.mechanisms) is not one KEDA's Kafka scaler knows" ;;
    *) sasl=none ;;
esac

secret() {  # secret NAME ARGS...: one Secret as YAML
    echo "---"
    kubectl --namespace "$namespace" create secret generic "$@" --dry-run=client --output yaml
}

secret receipt-worker \
    --from-file=apple-shared-secret="$dir/apple-shared-secret" \
    --from-file=app-store-key.p8="$dir/app-store-key.p8" \
    --from-file=ledger-url="$dir/ledger-url" \
    --from-file=kafka-password="$dir/kafka-password" \
    ${ca[@]+"${ca[@]}"} ${pg_ca[@]+"${pg_ca[@]}"}
secret receipt-worker-migrate \
    --from-file=ledger-migrate-url="$dir/ledger-migrate-url" \
    ${pg_ca[@]+"${pg_ca[@]}"}
secret receipt-worker-receiver \
    --from-file=kafka-password="$dir/receiver-kafka-password" \
    ${ca[@]+"${ca[@]}"}
secret receipt-worker-operator \
    --from-file=app-store-key.p8="$dir/app-store-key.p8" \
    --from-file=ledger-url="$dir/ledger-url" \
    --from-file=kafka-password="$dir/operator-kafka-password" \
    ${ca[@]+"${ca[@]}"} ${pg_ca[@]+"${pg_ca[@]}"}
secret receipt-worker-kafka-keda \
    --from-literal=sasl="$sasl" \
    --from-literal=username="$keda_user" \
    --from-file=password="$dir/keda-kafka-password" \
    --from-literal=tls="$tls" \
    ${keda_ca[@]+"${keda_ca[@]}"}
if [ -n "$desk" ]; then
    secret receipt-worker-desk \
        --from-file=app-store-key.p8="$dir/app-store-key.p8" \
        --from-file=ledger-url="$dir/desk-ledger-url" \
        --from-file=kafka-password="$dir/desk-kafka-password" \
        --from-file=oidc-client-secret="$dir/desk-oidc-client-secret" \
        --from-file=session-key="$dir/desk-session-key" \
        --from-file=erasure-key="$dir/desk-erasure-key" \
        ${ca[@]+"${ca[@]}"} ${pg_ca[@]+"${pg_ca[@]}"}
fi
