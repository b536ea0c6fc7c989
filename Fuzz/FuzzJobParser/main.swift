import CLibFuzzer
import Foundation
import ReceiptWorker

/// One value of the jobs topic, read as the worker reads it (jobs.max_bytes and
/// apple.transaction_id_requires_account_token at their defaults). Besides crashes, a job that is read must keep
/// the promises the ledger relies on: ids within their byte limits and free of control characters.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let value = Array(UnsafeBufferPointer(start: data, count: size))
    switch JobParser.parse(value, maxBytes: 262_144, transactionIDRequiresAccountToken: true) {
    case .job(let job):
        precondition(isLedgerKey(job.jobID, 128) && isLedgerKey(job.orderID, 128), "an id the ledger cannot key")
        precondition(isLedgerKey(job.userID, 128) && isLedgerKey(job.productID, 255), "an id the ledger cannot key")
        precondition((1...1000).contains(job.quantity), "quantity \(job.quantity) accepted")
        if let id = job.transactionID { precondition(isLedgerKey(id, 64), "transaction_id accepted unchecked") }
    case .invalidJob(let identity, _):
        // An invalid job is recorded under its job_id only when that id is valid, and always under its order_id.
        precondition(identity.jobID.isEmpty || isLedgerKey(identity.jobID, 128), "invalid job_id kept")
        precondition(isLedgerKey(identity.orderID, 128), "invalid order_id kept")
    case .unreadable:
        break
    }
    return 0
}

private func isLedgerKey(_ text: String, _ maximumBytes: Int) -> Bool {
    (1...maximumBytes).contains(text.utf8.count) && !text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
}

// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
