import AppleVerification
@testable import Events
@testable import Flows
import Testing

/// What the ledger keeps a job's answer under, and what grant services deduplicate events by: the same bytes in
/// every release, or a job delivered again beside the previous release would be another job, and its grant
/// another event.
@Suite("Keys kept across releases")
struct StoredKeysTests {
    @Test("a job's fingerprint is the SHA-256 of its fields as every release wrote them")
    func fingerprint() {
        let job = ReceiptJob(
            jobID: "j-1", orderID: "o-1", userID: "u-1", productID: "coins", quantity: 2, appAccountToken: nil,
            proof: .receipt("QUJD"), transactionID: "2000", submittedAt: nil)
        // sha256("job-v1\0o-1\0u-1\0coins\02\0\02000\0\0receipt\0QUJD"), by Python's hashlib.
        #expect(job.fingerprint == "0779c8e30016e21706b1b9c6d0a340b2f3f7f1ec84236f4ff5fdaeeabfef1b5e")
    }

    @Test("a grant's event id is the same name-based UUID as every release made it")
    func grantEventID() {
        // SHA-256 of "grant\0o-1\02000", its first 16 bytes with version 8 and RFC 9562's variant, by hashlib.
        #expect(StableID.uuid("grant\u{0}o-1\u{0}2000") == "a0c567d5-8c76-815a-aef5-16c99236db0d")
    }
}
