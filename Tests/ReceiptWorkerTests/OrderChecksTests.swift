import AppleVerification
@testable import Events
@testable import Flows
import Foundation
import Kafka
import Ledger
import Observability
@testable import ReceiptWorker
import Testing
import Vocabulary

@Suite("The contract's checks, one per row, in order")
struct OrderChecksTests {
    let job = ReceiptJob(
        jobID: "j1", orderID: "o1", userID: "u1", productID: "coins.100", quantity: 2,
        appAccountToken: "7e3fb20b-4cdb-47cc-936d-99d65f608138", proof: .receipt("QUJD"), transactionID: nil,
        submittedAt: nil)

    func verdict(_ transaction: AppleTransaction, environment: AppleEnvironment = .production) -> AppleVerdict {
        .verified(
            VerifiedPurchase(
                source: .receipt, bundleID: "com.example", environment: environment, transactions: [transaction]))
    }

    var good: AppleTransaction {
        AppleTransaction(
            transactionID: "t1", productID: "coins.100", quantity: 2,
            appAccountToken: "7E3FB20B-4CDB-47CC-936D-99D65F608138",
            purchaseDate: Date(timeIntervalSince1970: 100))
    }

    func reason(_ outcome: OrderChecks.Verdict) -> String {
        switch outcome {
        case .grant: "verified"
        case .deny(let reason, _, _, _): reason.rawValue
        }
    }

    @Test("a signed transaction of another product is product_mismatch, not transaction_not_found")
    func signedTransactionOfAnotherProduct() {
        var signedJob = job
        signedJob.proof = .signedTransaction("a.b.c")
        var cheap = good
        cheap.productID = "coins.10"
        #expect(reason(OrderChecks.evaluate(signedJob, verdict: verdict(cheap))) == "product_mismatch")
        // An app receipt holds many purchases: without a transaction id, none of the order's product is found.
        #expect(reason(OrderChecks.evaluate(job, verdict: verdict(cheap))) == "transaction_not_found")
    }

    @Test("products are compared as bytes: two spellings of one accented name are two products")
    func productBytes() {
        var accented = job
        accented.productID = "caf\u{E9}.pack"
        accented.proof = .signedTransaction("a.b.c")
        var decomposed = good
        decomposed.productID = "cafe\u{301}.pack"
        #expect(accented.productID == decomposed.productID)  // Swift's == says equal
        #expect(reason(OrderChecks.evaluate(accented, verdict: verdict(decomposed))) == "product_mismatch")
    }

    @Test("a matching purchase is granted")
    func grant() {
        #expect(reason(OrderChecks.evaluate(job, verdict: verdict(good))) == "verified")
    }

    @Test(
        "Apple's own rejections pass through",
        arguments: [AppleRejection.invalidReceipt, .bundleMismatch, .sandboxNotAllowed, .transactionNotFound])
    func appleRejections(rejection: AppleRejection) {
        #expect(reason(OrderChecks.evaluate(job, verdict: .rejected(rejection, detail: "x"))) == rejection.rawValue)
    }

    @Test("no entry for the product, or no entry with the reported id, is transaction_not_found")
    func notFound() {
        var other = good
        other.productID = "gems"
        #expect(reason(OrderChecks.evaluate(job, verdict: verdict(other))) == "transaction_not_found")
        var withID = job
        withID.transactionID = "t9"
        #expect(reason(OrderChecks.evaluate(withID, verdict: verdict(good))) == "transaction_not_found")
    }

    @Test("the reported transaction of another product is product_mismatch")
    func productMismatch() {
        var cheap = good
        cheap.productID = "coins.1"
        var withID = job
        withID.transactionID = "t1"
        #expect(reason(OrderChecks.evaluate(withID, verdict: verdict(cheap))) == "product_mismatch")
    }

    @Test("quantity, account, revocation and expiry, each in the contract's order")
    func laterRows() {
        var transaction = good
        transaction.quantity = 1
        transaction.appAccountToken = nil  // would also fail the account check: quantity comes first
        #expect(reason(OrderChecks.evaluate(job, verdict: verdict(transaction))) == "quantity_mismatch")
        transaction.quantity = 2
        #expect(reason(OrderChecks.evaluate(job, verdict: verdict(transaction))) == "account_mismatch")
        transaction.appAccountToken = good.appAccountToken
        transaction.revocationDate = Date(timeIntervalSince1970: 200)
        transaction.expiresDate = Date(timeIntervalSince1970: 150)
        #expect(
            reason(OrderChecks.evaluate(job, verdict: verdict(transaction), now: Date(timeIntervalSince1970: 300)))
                == "revoked")
        transaction.revocationDate = nil
        transaction.isUpgraded = true
        #expect(
            reason(OrderChecks.evaluate(job, verdict: verdict(transaction), now: Date(timeIntervalSince1970: 120)))
                == "revoked", "a period the player upgraded from is not theirs")
        transaction.isUpgraded = false
        #expect(
            reason(OrderChecks.evaluate(job, verdict: verdict(transaction), now: Date(timeIntervalSince1970: 300)))
                == "expired")
        #expect(
            reason(OrderChecks.evaluate(job, verdict: verdict(transaction), now: Date(timeIntervalSince1970: 120)))
                == "verified")
    }

    @Test("an order without a token accepts any account")
    func noToken() {
        var tokenless = job
        tokenless.appAccountToken = nil
        var transaction = good
        transaction.appAccountToken = nil
        #expect(reason(OrderChecks.evaluate(tokenless, verdict: verdict(transaction))) == "verified")
    }
}

@Suite("Result events")
struct ResultEventTests {
    func event(_ decision: ResultEvent.Decision, job: String, order: String, transaction: String?) -> ResultEvent {
        ResultEvent(
            eventID: ResultEvent.eventID(
                decision: decision, app: .defaultApp, jobID: job, fingerprint: "f", orderID: order,
                transactionID: transaction),
            jobID: job, orderID: order, userID: "u", decision: decision,
            productID: "p", quantity: 1, transactionID: transaction, originalTransactionID: nil,
            environment: .production,
            purchaseDate: Date(timeIntervalSince1970: 1), expiresDate: nil, verifiedAt: Date(timeIntervalSince1970: 2),
            attempts: 1, detail: nil)
    }

    @Test("every grant of one (order, transaction) has one id whatever the job; other decisions follow the job")
    func stableIDs() {
        #expect(
            event(.grant, job: "a", order: "o", transaction: "t").eventID
                == event(.grant, job: "b", order: "o", transaction: "t").eventID)
        #expect(
            event(.grant, job: "a", order: "o", transaction: "t").eventID
                != event(.grant, job: "a", order: "o2", transaction: "t").eventID)
        #expect(
            event(.deny(.revoked), job: "a", order: "o", transaction: "t").eventID
                == event(.deny(.revoked), job: "a", order: "o", transaction: nil).eventID)
        #expect(
            event(.deny(.revoked), job: "a", order: "o", transaction: nil).eventID
                != event(.deny(.revoked), job: "b", order: "o", transaction: nil).eventID)
        #expect(event(.grant, job: "a", order: "o", transaction: "t").eventID.count == 36)
    }

    @Test(
        "a deny's id is scoped by app; a grant's is (order, transaction) for every app, the ids of grants made before apps were scoped"
    )
    func scopedIDs() {
        let denies = [AppScope.defaultApp, AppScope("com.example.b")].map {
            ResultEvent.eventID(
                decision: .deny(.revoked), app: $0, jobID: "1", fingerprint: "f", orderID: "1", transactionID: nil)
        }
        #expect(denies[0] != denies[1])
        // A grant made by an earlier release, of any app, has this id: a job replayed after the upgrade under
        // a new job id repeats it, and a grant service deduplicating on it credits once.
        for app in [AppScope.defaultApp, AppScope("com.example.b")] {
            #expect(
                ResultEvent.eventID(
                    decision: .grant, app: app, jobID: "j", fingerprint: "f", orderID: "o", transactionID: "t")
                    == StableID.uuid("grant\u{0}o\u{0}t"))
        }
        // A job id reused for other content is another decision.
        #expect(
            ResultEvent.eventID(
                decision: .deny(.revoked), app: .defaultApp, jobID: "j", fingerprint: "f1", orderID: "o",
                transactionID: nil)
                != ResultEvent.eventID(
                    decision: .deny(.revoked), app: .defaultApp, jobID: "j", fingerprint: "f2", orderID: "o",
                    transactionID: nil))
    }

    @Test("the JSON has every contract field, nulls included, and CloudEvents headers")
    func json() throws {
        let value = event(.grant, job: "j", order: "o", transaction: "t")
        let object = try #require(try JSONSerialization.jsonObject(with: value.json()) as? [String: Any])
        #expect(
            Set(object.keys) == [
                "event_id", "type", "job_id", "order_id", "user_id", "decision", "reason", "product_id", "quantity",
                "transaction_id", "original_transaction_id", "environment", "bundle_id", "purchase_date",
                "expires_date", "verified_at", "attempts", "detail",
                // What the purchase was worth, and who credited it by hand: a grant's only.
                "price", "currency", "storefront", "transaction_reason", "in_app_ownership_type", "offer_type",
                "offer_identifier", "offer_discount_type", "offer_period", "billing_plan_type", "commitment", "revenue",
                "credited_by", "credit_reason",
            ])
        #expect(object["type"] as? String == "receipt.granted")  // the field carries ce_type too
        #expect(object["original_transaction_id"] is NSNull)
        #expect(object["bundle_id"] is NSNull)  // a malformed job, for which no app was chosen
        #expect(object["purchase_date"] as? String == "1970-01-01T00:00:01.000Z")
        let headers = Dictionary(
            uniqueKeysWithValues: value.stored().record(topic: "results", source: "receipt-worker").headers.map {
                ($0.name, $0.stringValue ?? "")
            })
        #expect(headers["ce_specversion"] == "1.0")
        #expect(headers["ce_id"] == value.eventID)
        #expect(headers["ce_type"] == "receipt.granted")
        #expect(headers["content-type"] == "application/json")
    }
}

@Suite("Formatting on the hot path")
struct FormattingTests {
    @Test(
        "RFC 3339 timestamps in UTC with milliseconds",
        arguments: [
            (0.0, "1970-01-01T00:00:00.000Z"), (1.5, "1970-01-01T00:00:01.500Z"),
            (1_795_946_400.123, "2026-11-29T10:00:00.123Z"), (951_782_400.999, "2000-02-29T00:00:00.999Z"),
        ])
    func timestamps(seconds: Double, expected: String) {
        #expect(RFC3339.format(Date(timeIntervalSince1970: seconds)) == expected)
    }

    @Test("event ids are lower-case UUID text with the RFC 9562 version 8 and variant bits")
    func uuidShape() {
        let id = ResultEvent.eventID(
            decision: .grant, app: .defaultApp, jobID: "j", fingerprint: "f", orderID: "o", transactionID: "t")
        let parts = id.split(separator: "-").map(\.count)
        #expect(parts == [8, 4, 4, 4, 12])
        #expect(id.allSatisfy { "0123456789abcdef-".contains($0) })
        #expect(Array(id)[14] == "8")
        #expect("89ab".contains(Array(id)[19]))
        #expect(UUID(uuidString: id) != nil)
    }
}
