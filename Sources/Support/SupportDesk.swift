public import AppleVerification
public import Flows
public import Foundation
public import LedgerDomain
public import Messaging
import Observability
import Vocabulary

/// A support desk's questions about one app's purchases (`receipt-worker lookup` and `credit`): Apple's view of
/// a purchase, verified, beside the ledger's, and the credit of a purchase no order holds through the same ledger
/// claim as a job's, so it is never a second grant. Apple's transient failures are retried as a job's are
/// (`retry.*`); what stays unanswered throws.
public struct SupportDesk: Sendable {
    let app: AppleApp
    let api: AppStoreServerAPIClient
    let allowSandbox: Bool
    let ledger: any SupportStore & DecisionStore & DeskStore
    let retry: RetryPolicy

    public init(
        app: AppleApp, api: AppStoreServerAPIClient, allowSandbox: Bool,
        ledger: any SupportStore & DecisionStore & DeskStore,
        retry: RetryPolicy
    ) {
        self.app = app
        self.api = api
        self.allowSandbox = allowSandbox
        self.ledger = ledger
        self.retry = retry
    }

    /// What support is asked about.
    public enum Query: Sendable, Equatable {
        /// The order id on the player's invoice from Apple (Look Up Order ID).
        case appleOrderID(String)
        case transactionID(String)
        /// The game's order (`order_id` of a job): the transactions the ledger granted to it.
        case orderID(String)
        /// The player's `appAccountToken`: the purchases Apple reported with it that no job claimed.
        case appAccountToken(String)
        /// The game's player (`user_id` of a job): every purchase the ledger granted to them, newest first.
        case userID(String)
        /// Any transaction id of the customer: their whole history in the app at Apple (Get Transaction History).
        case customerOf(transactionID: String)
    }

    /// How many of a player's grants a lookup shows, and how many pages of Apple's history (20 each) it reads.
    static let playerGrantsShown = 100
    static let historyPages = 10

    /// `now`: when the question is asked (a subscription's period ended before it, or not).
    public func lookup(_ query: Query, now: Date = Date()) async throws -> LookupReport {
        var report = LookupReport(query: query.shown, bundleID: app.bundleID)
        for (environment, signed) in try await signedTransactions(query, report: &report) {
            report.purchases.append(try await purchase(signed, environment: environment))
        }
        try await followEndedPeriods(&report, now: now)
        return report
    }

    /// A subscription's invoice is one period: when its period ended, the paid period now is another transaction.
    /// For a subscription an order holds, its latest period the ledger granted to that order is looked up too (a
    /// renewal credited to it); for one no order holds, the line says which invoice to look up instead.
    private func followEndedPeriods(_ report: inout LookupReport, now: Date) async throws {
        for index in report.purchases.indices {
            let purchase = report.purchases[index]
            guard purchase.verified, ProductType(rawValue: purchase.type) == .autoRenewableSubscription,
                let expires = purchase.expiresDate, expires <= now, purchase.revocationDate == nil
            else { continue }
            let shown = Set(report.purchases.map(\.transactionID))
            guard let grant = purchase.record.grant,
                let latest = try await ledger.grantedTransactions(orderID: grant.orderID, app: app.scope)
                    .last(where: { !shown.contains($0.1) })
            else {
                report.purchases[index].verdict +=
                    "; the subscription's current period is another transaction: look up the invoice of its latest"
                    + " renewal (Apple sends one per renewal) or its transaction id"
                continue
            }
            var more = LookupReport(query: "", bundleID: app.bundleID)
            for (environment, signed) in try await transactionInfo([(latest.0, latest.1)], report: &more) {
                report.purchases.append(try await self.purchase(signed, environment: environment))
                report.purchases[index].verdict += "; its latest period is transaction \(latest.1) (below)"
            }
        }
    }

    /// Every signed transaction the query leads to, with the environment it was found in.
    private func signedTransactions(_ query: Query, report: inout LookupReport) async throws
        -> [(AppleEnvironment, String)]
    {
        switch query {
        case .appleOrderID(let orderID):
            // Apple's Look Up Order ID answers in Production only ("not available in the sandbox environment").
            let answer = try await retrying {
                try await api.lookUpOrder(id: orderID, environment: .production, attempts: &$0)
            }
            guard case .found(let signed) = answer, !signed.isEmpty else {
                report.notFound =
                    "Apple knows no order \(orderID) of this app: not this app's (or not an Apple order id)"
                return []
            }
            return signed.map { (.production, $0) }
        case .transactionID(let id):
            return try await transactionInfo([(nil, id)], report: &report)
        case .orderID(let orderID):
            let granted = try await ledger.grantedTransactions(orderID: orderID, app: app.scope)
            if granted.isEmpty { report.notFound = "the ledger holds no grant for order \(orderID) of this app" }
            return try await transactionInfo(granted.map { ($0.0, $0.1) }, report: &report)
        case .appAccountToken(let token):
            let reported = try await ledger.reportedTransactions(appAccountToken: token, app: app.scope)
            if reported.isEmpty {
                report.notFound =
                    "no purchase Apple reported with this app account token waits or was credited unclaimed here"
            }
            return try await transactionInfo(reported.map { ($0.0, $0.1) }, report: &report)
        case .userID(let userID):
            let granted = try await ledger.grantedToPlayer(userID, app: app.scope, limit: Self.playerGrantsShown)
            if granted.isEmpty { report.notFound = "the ledger holds no grant to player \(userID) in this app" }
            return try await transactionInfo(granted.map { ($0.environment, $0.transactionID) }, report: &report)
        case .customerOf(let id):
            return try await history(of: id, report: &report)
        }
    }

    /// Apple's Get Transaction History from one transaction id: found in Production, else (where Sandbox is
    /// accepted) in the Sandbox; at most ``historyPages`` pages, each in the app's rate lane.
    private func history(of id: String, report: inout LookupReport) async throws -> [(AppleEnvironment, String)] {
        let environments: [AppleEnvironment] = allowSandbox ? [.production, .sandbox] : [.production]
        for environment in environments {
            var signed: [String] = []
            var revision: String?
            for page in 0..<Self.historyPages {
                let answer = try await retrying {
                    try await api.transactionHistory(
                        id: id, revision: revision, environment: environment, attempts: &$0)
                }
                switch answer {
                case .notFound where page == 0:
                    break
                case .notFound:
                    report.notFound("Apple's history of transaction \(id) ended early: shown as far as it went")
                case .refused(_, let code):
                    report.notFound("Apple refused transaction id \(id) (error \(code.map(String.init) ?? "none"))")
                    return []
                case .page(let found):
                    signed += found.signedTransactions
                    revision = found.revision
                    if found.hasMore && revision != nil {
                        if page == Self.historyPages - 1 {
                            report.notFound(
                                "the customer has more than \(signed.count) purchases: the oldest \(signed.count) shown"
                            )
                        }
                        continue
                    }
                }
                break
            }
            if !signed.isEmpty { return signed.map { (environment, $0) } }
        }
        report.notFound(
            "Apple knows no transaction \(id) of this app"
                + (allowSandbox ? "" : " in Production (Sandbox is not looked up: apple.allow_sandbox is false)"))
        return []
    }

    private func transactionInfo(_ ids: [(AppleEnvironment?, String)], report: inout LookupReport) async throws
        -> [(AppleEnvironment, String)]
    {
        var found: [(AppleEnvironment, String)] = []
        for (environment, id) in ids {
            if environment == .sandbox && !allowSandbox {
                // The ledger's Sandbox record (granted while Sandbox was accepted): shown as the ledger holds it,
                // for support must see that an order was granted a tester's purchase; Production knows nothing of
                // it, and no Sandbox endpoint is called where Sandbox is not accepted.
                let record = try await ledger.supportRecord(
                    app: app.scope, environment: .sandbox, purchaseID: .transaction(id), transactionID: id)
                report.purchases.append(LookupReport.Purchase(sandboxRecord: record, transactionID: id))
                continue
            }
            let answer = try await retrying { try await api.transactionInfo(id: id, in: environment, attempts: &$0) }
            switch answer {
            case .found(let signed):
                // Get Transaction Info answers from the host it asked: Sandbox only when allowed, or asked.
                found.append((environment ?? .production, signed))
            case .notFound:
                report.notFound(
                    "Apple knows no transaction \(id) of this app"
                        + (allowSandbox
                            ? "" : " in Production (Sandbox is not looked up: apple.allow_sandbox is false)")
                        + ": not this app's, or no such purchase")
            case .rejected(let code):
                report.notFound("Apple refused transaction id \(id) (error \(code))")
            }
        }
        return found
    }

    /// One signed transaction, verified, beside the ledger's record of its purchase.
    private func purchase(_ signed: String, environment: AppleEnvironment) async throws -> LookupReport.Purchase {
        let payload: JWSTransaction
        let transaction: AppleTransaction
        do {
            (payload, transaction) = try await verified(signed)
        } catch {
            return LookupReport.Purchase(unverified: error.reason)
        }
        let actual = payload.environment ?? environment
        let record = try await ledger.supportRecord(
            app: app.scope, environment: actual, purchaseID: transaction.purchaseIdentity,
            transactionID: transaction.transactionID)
        return LookupReport.Purchase(
            transaction: transaction, payload: payload, environment: actual, record: record,
            sandboxAccepted: allowSandbox)
    }

    /// A signed transaction from Apple's answer, verified for this app (signature, bundle id, environment) and read.
    /// A chain whose revocation status is being asked (the first of its kind) is waited for, once.
    func verified(_ signed: String) async throws(AppleVerificationError) -> (JWSTransaction, AppleTransaction) {
        let verifier = app.signedData
        let payload = try await verifier.settling { () throws(AppleVerificationError) in
            try verifier.verifyTransaction(signed)
        }
        return (payload, try AppleTransaction(payload))
    }

    /// Apple's call, retried as a job's are, for `retry.max_attempts` rounds (``RetryPolicy/retryingApple(_:)``).
    func retrying<T>(_ call: (inout Int) async throws -> T) async throws -> T {
        try await retry.retryingApple(call)
    }
}

extension SupportDesk.Query {
    /// The query as printed: an app account token shortened, never in full.
    var shown: String {
        switch self {
        case .appleOrderID(let id): "Apple order \(id)"
        case .transactionID(let id): "transaction \(id)"
        case .orderID(let id): "order \(id)"
        case .appAccountToken(let token): "app account token \(LookupReport.masked(token))"
        case .userID(let id): "player \(id)"
        case .customerOf(let id): "the customer's history from transaction \(id)"
        }
    }
}
