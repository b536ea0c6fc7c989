#!/usr/bin/env bash
# Every Secret the deployment mounts or KEDA reads, made from a directory of files (one value per file):
#
#   deploy/kubernetes/create-secrets.sh DIR                        # prints the four Secrets as YAML, changes nothing
#   deploy/kubernetes/create-secrets.sh DIR | kubectl apply -f -   # creates them, or updates them (then restart the pods)
#
# It runs `kubectl create secret generic ... --dry-run=client -o yaml`, which asks no cluster. The output holds
# the secrets (base64): pipe it to kubectl apply, or to your sealing tool (kubeseal, ...), never to a file in Git.
# The test command runs this script on stub files (Tests/deploy/check_deploy.py) and checks that every Secret and
# key a workload or KEDA reads is made here, and that no workload mounts a key it does not read.
#
# DIR holds (deploy/README.md, "Secrets"):
#   apple-shared-secret       the app-specific shared secret (App Store Connect)
#   app-store-key.p8          the In-App Purchase key whose id is apple.api.key_id
#   ledger-url                the workers' PostgreSQL URL: postgresql://receipt_worker_app:PASSWORD@HOST:5432/DB
#   ledger-migrate-url        the schema owner's URL, direct to PostgreSQL (not PgBouncer): only the migrate Job
#   kafka-password            the workers' Kafka user's password (receipt-worker)
#   receiver-kafka-password   the receivers' Kafka user's password (receipt-worker-receiver)
#   keda-kafka-password       KEDA's Kafka user's password (receipt-worker-keda)
#   kafka-ca.crt              PEM of the CA that signed the brokers' certificates; needed while worker.properties
#                             sets kafka.ssl.ca.location (a private CA, such as Strimzi's)
#
# The Secrets, one per reader, each with only what that reader uses:
#   receipt-worker             the workers (deployment.yaml): shared secret, key, ledger-url, Kafka password, CA
#   receipt-worker-migrate     the migrate Job (migrate-job.yaml): ledger-migrate-url only
#   receipt-worker-receiver    the receivers (receiver.yaml): their Kafka password and the CA only
#   receipt-worker-kafka-keda  KEDA's TriggerAuthentication (keda-scaledobject.yaml): sasl, username, password,
#                              tls, ca.crt; sasl and tls follow worker.properties' kafka.* settings
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
namespace=receipt-worker      # kustomization.yaml's namespace
keda_user=receipt-worker-keda # KEDA's Kafka user (kafka-users-example.yaml): Describe on the group and jobs topic

die() { echo "create-secrets.sh: $*" >&2; exit 2; }
[ $# -eq 1 ] && [ -d "$1" ] || die "usage: create-secrets.sh DIR (a directory of files: see the top of this script)"
dir="$(cd "$1" && pwd)"
command -v kubectl >/dev/null || die "kubectl is not installed (it builds the Secrets, offline)"

# The value of a key of worker.properties (the last one set), empty when unset.
property() { sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" "$here/worker.properties" | tail -n 1; }

# The brokers' CA is needed while the workers' configuration names one.
ca_used="$(property kafka.ssl.ca.location)"
for name in apple-shared-secret app-store-key.p8 ledger-url ledger-migrate-url kafka-password \
    receiver-kafka-password keda-kafka-password ${ca_used:+kafka-ca.crt}; do
    [ -s "$dir/$name" ] || die "$dir/$name is missing or empty"
done

# The owner's URL must not reach the workers: the workers' role can then create and drop nothing.
if cmp -s "$dir/ledger-url" "$dir/ledger-migrate-url"; then
    die "ledger-url and ledger-migrate-url are the same: the workers must not connect as the schema's owner"
fi
if cmp -s "$dir/kafka-password" "$dir/receiver-kafka-password" || \
    cmp -s "$dir/kafka-password" "$dir/keda-kafka-password"; then
    die "a Kafka password is shared: the workers, the receivers and KEDA each have a user of their own"
fi

# The brokers' CA: in every Kafka client's Secret.
ca=()
keda_ca=()
if [ -n "$ca_used" ]; then
    ca=(--from-file=kafka-ca.crt="$dir/kafka-ca.crt")
    keda_ca=(--from-file=ca.crt="$dir/kafka-ca.crt")
fi

# KEDA's Kafka scaler settings, from the workers' own.
protocol="$(property kafka.security.protocol)"
case "$protocol" in
    SSL | SASL_SSL) tls=enable ;;
    PLAINTEXT | SASL_PLAINTEXT | "") tls=disable ;;
    *) die "worker.properties: kafka.security.protocol=$protocol is not one KEDA's Kafka scaler knows" ;;
esac
case "$protocol:$(property kafka.sasl.mechanisms)" in
    SASL_*:SCRAM-SHA-512) sasl=scram_sha512 ;;
    SASL_*:SCRAM-SHA-256) sasl=scram_sha256 ;;
    SASL_*:PLAIN) sasl=plaintext ;;
    SASL_*:*) die "worker.properties: kafka.sasl.mechanisms=$(property kafka.sasl.mechanisms) is not one KEDA's Kafka scaler knows" ;;
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
    "${ca[@]}"
secret receipt-worker-migrate \
    --from-file=ledger-migrate-url="$dir/ledger-migrate-url"
secret receipt-worker-receiver \
    --from-file=kafka-password="$dir/receiver-kafka-password" \
    "${ca[@]}"
secret receipt-worker-kafka-keda \
    --from-literal=sasl="$sasl" \
    --from-literal=username="$keda_user" \
    --from-file=password="$dir/keda-kafka-password" \
    --from-literal=tls="$tls" \
    "${keda_ca[@]}"
