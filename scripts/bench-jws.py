"""Apple's official App Store Server Library verifying the same JWS, for scripts/bench-jws.sh."""
import sys
import time

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, _ChainVerifier

jws_path, root_path, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
jws = open(jws_path).read().strip()
root = open(root_path, "rb").read()
verifier = SignedDataVerifier([root], False, Environment.SANDBOX, "com.example")
# Apple's test root fails OpenSSL's strict mode; Apple's own tests swap in a non-strict chain verifier thus.
verifier._chain_verifier = _ChainVerifier([root], enable_strict_checks=False)
expected = verifier.verify_and_decode_signed_transaction(jws)
count, start = 0, time.perf_counter()
while time.perf_counter() - start < seconds:
    for _ in range(20):
        assert verifier.verify_and_decode_signed_transaction(jws).transactionId == expected.transactionId
    count += 20
print(f"{int(count / (time.perf_counter() - start))} verifications/s")
