import AppleVerification
@testable import Flows
import Foundation
import Observability
@testable import ReceiptWorker
import Testing
import Vocabulary

@Suite("Reading jobs")
struct JobParserTests {
    func parse(_ json: String, maxBytes: Int = 262_144, requireToken: Bool = false) -> JobParseResult {
        JobParser.parse(Array(json.utf8), maxBytes: maxBytes, transactionIDRequiresAccountToken: requireToken)
    }

    let base = #""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#

    @Test("a full job is read, token lower-cased, quantity defaulting to 1")
    func fullJob() throws {
        guard
            case .job(let job) = parse(
                "{\(base),\"receipt\":\"QUJD\",\"transaction_id\":\"42\",\"app_account_token\":\"7E3FB20B-4CDB-47CC-936D-99D65F608138\",\"submitted_at\":\"2026-11-29T10:00:00.5Z\",\"extra\":1}"
            )
        else { Issue.record("not a job"); return }
        #expect(job.quantity == 1)
        #expect(job.proof == .receipt("QUJD"))
        #expect(job.transactionID == "42")
        #expect(job.appAccountToken == "7e3fb20b-4cdb-47cc-936d-99d65f608138")
        #expect(job.submittedAt == Date(timeIntervalSince1970: 1_795_946_400.5))
    }

    @Test(
        "each proof form is read",
        arguments: [
            (#""signed_transaction":"a.b.c""#, PurchaseProof.signedTransaction("a.b.c")),
            (#""transaction_id":"2000000000000001""#, .transactionID("2000000000000001")),
        ])
    func proofs(field: String, proof: PurchaseProof) {
        guard case .job(let job) = parse("{\(base),\(field)}") else { Issue.record("not a job"); return }
        #expect(job.proof == proof)
    }

    @Test(
        "not JSON, not an object, oversized, or no order_id: to the DLQ unchanged",
        arguments: [
            "not json", "[1,2]", "\"text\"", #"{"job_id":"j"}"#, #"{"order_id":""}"#, #"{"order_id":7}"#,
        ])
    func unreadable(json: String) {
        guard case .unreadable = parse(json) else { Issue.record("\(json) was read"); return }
    }

    @Test("ids with control characters (a NUL above all) are refused, and such a job_id is never kept for the ledger")
    func controlCharacters() {
        guard
            case .invalidJob(let identity, let reason) = parse(
                #"{"job_id":"j\u0000x","order_id":"o1","user_id":"u1","product_id":"p","receipt":"QUJD"}"#)
        else { Issue.record("a NUL in job_id was accepted"); return }
        #expect(identity.jobID.isEmpty)  // not recorded in the ledger under a truncated id
        #expect(reason.contains("job_id"))
        guard
            case .invalidJob(_, let userReason) = parse(
                #"{"job_id":"j1","order_id":"o1","user_id":"u\n1","product_id":"p","receipt":"QUJD"}"#)
        else { Issue.record("a newline in user_id was accepted"); return }
        #expect(userReason.contains("user_id"))
        guard
            case .unreadable = parse(
                #"{"job_id":"j1","order_id":"o\u00001","user_id":"u1","product_id":"p","receipt":"QUJD"}"#)
        else { Issue.record("a NUL in order_id was accepted"); return }
    }

    @Test("a job_id in support's reserved space (support:) is malformed: a client never forges a support credit's id")
    func reservedJobID() {
        guard
            case .invalidJob(let identity, let reason) = parse(
                #"{"job_id":"support:2000000000000001","order_id":"o1","user_id":"u1","product_id":"p","receipt":"QUJD"}"#
            )
        else { Issue.record("a support: job id was accepted"); return }
        #expect(reason.contains("reserved"))
        #expect(identity.jobID == "" && identity.orderID == "o1", "the order is answered; the id is not usable")
        guard
            case .job = parse(
                #"{"job_id":"supported-1","order_id":"o1","user_id":"u1","product_id":"p","receipt":"QUJD"}"#)
        else { Issue.record("an ordinary job id was refused"); return }
    }

    @Test(
        "bundle_id names the app: absent or null is the default app; empty, too long, not a string or with a control character is malformed"
    )
    func bundleID() {
        guard case .job(let named) = parse(#"{\#(base),"receipt":"QUJD","bundle_id":"com.example.puzzle"}"#),
            case .job(let absent) = parse(#"{\#(base),"receipt":"QUJD","bundle_id":null}"#)
        else { Issue.record("not a job"); return }
        #expect(named.bundleID == "com.example.puzzle")
        #expect(absent.bundleID == nil)
        for bad in [#""""#, "\"\(String(repeating: "a", count: 256))\"", "7", #""com.x\n""#] {
            guard case .invalidJob(_, let reason) = parse(#"{\#(base),"receipt":"QUJD","bundle_id":\#(bad)}"#) else {
                Issue.record("bundle_id \(bad) was accepted")
                continue
            }
            #expect(reason.contains("bundle_id"))
        }
    }

    @Test("a message over jobs.max_bytes is unreadable")
    func oversized() {
        guard
            case .unreadable(let reason) = parse(
                "{\(base),\"receipt\":\"\(String(repeating: "A", count: 400))\"}", maxBytes: 300)
        else { Issue.record("read"); return }
        #expect(reason.contains("jobs.max_bytes"))
    }

    @Test(
        "an order with a missing or invalid field is malformed, named, and keeps what could be read",
        arguments: [
            (#"{"order_id":"o1","user_id":"u1","product_id":"p","receipt":"QUJD"}"#, "job_id"),
            (#"{"job_id":"j1","order_id":"o1","product_id":"p","receipt":"QUJD"}"#, "user_id"),
            (
                "{\(#""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#),\"receipt\":\"QUJD\",\"quantity\":0}",
                "quantity"
            ),
            (
                "{\(#""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#),\"receipt\":\"QUJD\",\"quantity\":1.5}",
                "quantity"
            ),
            (
                "{\(#""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#),\"receipt\":\"QUJD\",\"quantity\":true}",
                "quantity"
            ),
            (
                "{\(#""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#),\"receipt\":\"QUJD\",\"quantity\":\"2\"}",
                "quantity"
            ),
            (
                "{\(#""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#),\"receipt\":\"QUJD\",\"app_account_token\":\"nope\"}",
                "app_account_token"
            ),
            ("{\(#""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#)}", "one of receipt"),
            (
                "{\(#""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#),\"receipt\":\"QUJD\",\"signed_transaction\":\"a.b.c\"}",
                "one of"
            ),
            (
                "{\(#""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#),\"receipt\":\"not base64!!\"}",
                "receipt"
            ),
            (
                "{\(#""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#),\"signed_transaction\":\"abc\"}",
                "signed_transaction"
            ),
            (
                "{\(#""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#),\"receipt\":\"QUJD\",\"submitted_at\":\"yesterday\"}",
                "submitted_at"
            ),
        ])
    func invalid(json: String, field: String) {
        guard case .invalidJob(let identity, let reason) = parse(json) else {
            Issue.record("\(json) not invalid"); return
        }
        #expect(identity.orderID == "o1")
        #expect(reason.contains(field))
        #expect(!reason.contains("QUJD"))
    }
}

@Suite("Reading hostile jobs")
struct HostileJobTests {
    let base = #""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#

    func parse(_ json: String, requireToken: Bool = true) -> JobParseResult {
        JobParser.parse(Array(json.utf8), maxBytes: 262_144, transactionIDRequiresAccountToken: requireToken)
    }

    func refusal(_ result: JobParseResult) -> String? {
        switch result {
        case .job: nil
        case .invalidJob(_, let reason), .unreadable(let reason): reason
        }
    }

    @Test(
        "a key given twice, however it is written, makes the message unreadable",
        arguments: [
            #"{"job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100","quantity":1,"quantity":100,"receipt":"QUJD"}"#,
            #"{"job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100","product_id":"gems.5000","receipt":"QUJD"}"#,
            #"{"job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100","quantity":5,"quantity":1,"receipt":"QUJD"}"#,
        ])
    func duplicateKeys(json: String) {
        guard case .unreadable(let reason) = parse(json) else {
            Issue.record("read as a job")
            return
        }
        #expect(reason.contains("twice"))
    }

    @Test("a key given twice among many is found as among few, and a job of many keys is read by name")
    func duplicateKeyAmongMany() {
        let extra = (0..<40).map { "\"x\($0)\":\($0)" }.joined(separator: ",")
        guard case .unreadable(let reason) = parse("{\(base),\(extra),\"x7\":1,\"receipt\":\"QUJD\"}") else {
            Issue.record("read as a job")
            return
        }
        #expect(reason.contains("\"x7\" appears twice"))
        guard case .job(let job) = parse("{\(extra),\(base),\"quantity\":3,\"receipt\":\"QUJD\"}") else {
            Issue.record("a job with unknown keys refused")
            return
        }
        #expect(job.quantity == 3)
        #expect(job.productID == "coins.100")
    }

    @Test(
        "a quantity is a plain integer", arguments: ["1.0", "1e2", "-1", "0", "1001", "true", #""1""#, "1E0", "1.5"])
    func quantities(raw: String) {
        guard case .invalidJob(_, let reason) = parse("{\(base),\"quantity\":\(raw),\"receipt\":\"QUJD\"}") else {
            Issue.record("quantity \(raw) accepted")
            return
        }
        #expect(reason.contains("quantity"))
    }

    @Test("lengths are counted in bytes: one letter with 3,000 combining marks is not a short id")
    func combiningMarks() {
        let marks = "a" + String(repeating: "\u{0301}", count: 3_000)
        #expect(marks.count == 1)
        let result = parse(
            "{\"job_id\":\"\(marks)\",\"order_id\":\"o1\",\"user_id\":\"u1\",\"product_id\":\"p\",\"receipt\":\"QUJD\"}"
        )
        guard case .invalidJob(let identity, let reason) = result else {
            Issue.record("accepted")
            return
        }
        #expect(reason.contains("job_id"))
        // Such an id is never a ledger key (PostgreSQL's index rows stop at a few KB).
        #expect(identity.jobID.isEmpty)
        let longOrder = String(repeating: "é", count: 65)  // 65 characters, 130 bytes
        #expect(
            refusal(parse("{\"job_id\":\"j\",\"order_id\":\"\(longOrder)\",\"receipt\":\"QUJD\"}"))?.contains(
                "order_id")
                == true)
    }

    @Test(
        "a transaction id is 1 to 64 letters or digits (it goes into Apple's URL path)",
        arguments: ["../../v1/notifications", String(repeating: "9", count: 65), "12 34", "١٢٣"])
    func transactionIDs(id: String) {
        let json =
            "{\(base),\"transaction_id\":\(JSONString.quote(id)),\"app_account_token\":\"7E3FB20B-4CDB-47CC-936D-99D65F608138\"}"
        #expect(refusal(parse(json))?.contains("transaction_id") == true)
    }

    @Test("a bare transaction id needs the order's app_account_token unless the rule is off")
    func bareTransactionID() {
        let bare = "{\(base),\"transaction_id\":\"2000000000000001\"}"
        #expect(refusal(parse(bare))?.contains("app_account_token") == true)
        guard case .job = parse(bare, requireToken: false) else {
            Issue.record("refused with the rule off")
            return
        }
        let withToken =
            "{\(base),\"transaction_id\":\"2000000000000001\",\"app_account_token\":\"7E3FB20B-4CDB-47CC-936D-99D65F608138\"}"
        guard case .job = parse(withToken) else {
            Issue.record("refused with a token")
            return
        }
        // Beside a receipt the id only selects an entry: the receipt is the proof.
        guard case .job = parse("{\(base),\"transaction_id\":\"2000000000000001\",\"receipt\":\"QUJD\"}") else {
            Issue.record("refused beside a receipt")
            return
        }
    }

    @Test("nesting as deep as jobs.max_bytes allows is refused without recursion")
    func deepNesting() {
        let deep =
            "{\(base),\"receipt\":\"QUJD\",\"extra\":" + String(repeating: "[", count: 200_000)
            + String(repeating: "]", count: 200_000) + "}"
        guard case .unreadable = parse(deep) else {
            Issue.record("read")
            return
        }
    }
}

@Suite("Receipts known as base64")
struct Base64TextTests {
    @Test("plain base64 is known without decoding, and whatever it accepts Foundation's decoder accepts")
    func plainIsDecodable() {
        for plain in ["", "QUJD", "QUI=", "QQ==", "TUlJ+/9a"] { #expect(Base64Text.isPlain(plain)) }
        // Four bytes or a multiple, so the alphabet decides, not the length.
        for other in ["QUJ", "Q===", "QU=D", "QU\nJ", "QU J", "QUJD-_==", "é12", "QUJD\0AAA"] {
            #expect(!Base64Text.isPlain(other))
        }
        // Random texts over base64's alphabet, its padding and a few bytes it skips: none called plain that the
        // decoder refuses, and the plain ones are found.
        let alphabet = Array("ABCXYZabcxyz0189+/==\n -_é".unicodeScalars)
        var generator = SystemRandomNumberGenerator()
        var plain = 0
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...12, using: &generator)
            var text = ""
            for _ in 0..<length { text.unicodeScalars.append(alphabet.randomElement(using: &generator)!) }
            guard Base64Text.isPlain(text) else { continue }
            plain += 1
            #expect(Data(base64Encoded: text, options: .ignoreUnknownCharacters) != nil, "\(text)")
        }
        #expect(plain > 100)
    }

    @Test("a receipt with line breaks is still read, and one that is not base64 is refused")
    func receiptsAsJobsGiveThem() {
        let base = #""job_id":"j1","order_id":"o1","user_id":"u1","product_id":"coins.100""#
        func parse(_ receipt: String) -> JobParseResult {
            JobParser.parse(Array("{\(base),\"receipt\":\"\(receipt)\"}".utf8), maxBytes: 262_144)
        }
        guard case .job(let job) = parse(#"QUJD\r\nQUJD"#) else { Issue.record("not read"); return }
        #expect(job.proof == .receipt("QUJD\r\nQUJD"))
        guard case .invalidJob(_, let reason) = parse("QUJDQ") else { Issue.record("not refused"); return }
        #expect(reason == "receipt is not base64")
    }
}
