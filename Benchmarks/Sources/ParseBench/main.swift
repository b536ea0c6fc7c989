import AppleVerification
import Foundation

// How long decoding Apple's answers takes on the calling thread (pin it to one core with taskset):
//   parse-bench [--file ANSWER.json] [--count N]
// Without --file: the App Store simulator's verifyReceipt answer for one consumable (564 bytes), the shape every
// receipt job's call to Apple returns in scripts/bench-worker.sh.

let simulatorAnswer = #"""
    {"status":0,"receipt":{"receipt_creation_date_ms":"1796487803167","application_version":"1",\#
    "receipt_type":"Production","bundle_id":"com.example","original_application_version":"1",\#
    "request_date_ms":"1796487803167","in_app":[{"purchase_date":"2026-12-05 16:23:23 Etc/GMT",\#
    "original_transaction_id":"2000000000000001","is_trial_period":"false","in_app_ownership_type":"PURCHASED",\#
    "quantity":"1","original_purchase_date_ms":"1796487803058","purchase_date_ms":"1796487803058",\#
    "transaction_id":"2000000000000001","product_id":"coins.100"}]},"environment":"Production"}
    """#

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}
let bytes =
    try option("--file").map { Array(try Data(contentsOf: URL(fileURLWithPath: $0))) }
    ?? Array(simulatorAnswer.utf8)
let count = Int(option("--count") ?? "") ?? 200_000

var statuses = 0
let started = ContinuousClock.now
for _ in 0..<count {
    do {
        statuses &+= try VerifyReceiptResponse(json: bytes).status
    } catch {
        FileHandle.standardError.write(Data("parse-bench: the answer does not decode: \(error)\n".utf8))
        exit(2)
    }
}
let elapsed = ContinuousClock.now - started
let microseconds = Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12
print(
    String(
        format: "verifyReceipt's answer (%d bytes): %.2f us a decoding, %d decodings (status sum %d)", bytes.count,
        microseconds / Double(count), count, statuses))
