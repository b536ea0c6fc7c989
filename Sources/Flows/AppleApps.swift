public import AppleVerification
import Crypto
public import Foundation
public import LedgerDomain
public import Vocabulary

/// What the job flow asks of Apple: a verdict on a proof (``AppleVerifier``; a test gives its own).
public protocol PurchaseVerifying: Sendable {
    /// `attempts` counts calls made to Apple. Transient failures throw a retriable ``AppleVerificationError``.
    func verify(_ proof: PurchaseProof, selecting: ReceiptSelection?, attempts: inout Int) async throws
        -> AppleVerdict
}

extension AppleVerifier: PurchaseVerifying {}

/// What the consumption flow asks of Apple: Send Consumption Information (``AppStoreServerAPIClient``).
public protocol ConsumptionSending: Sendable {
    /// Whether the app's Sandbox transactions may be answered.
    var allowsSandbox: Bool { get }
    func sendConsumption(transactionID: String, body: Data, environment: AppleEnvironment, attempts: inout Int)
        async throws -> AppStoreServerAPIClient.ConsumptionDelivery
}

extension AppStoreServerAPIClient: ConsumptionSending {
    public var allowsSandbox: Bool { configuration.allowSandbox }
}

/// One app the worker verifies purchases of: its name (in metrics and logs), its bundle id, where its rows
/// are kept in the ledger, and Apple's side for it.
public struct AppleApp: Sendable {
    public let name: String
    public let bundleID: String
    /// The ledger's scope of the app's rows: the default app's is "", every other app's its bundle id.
    public let scope: AppScope
    public let purchases: any PurchaseVerifying
    /// Verifies the app's signed transactions, renewal info and notifications.
    public let signedData: SignedDataVerifier
    /// Send Consumption Information, when the app has an App Store Server API key.
    public let consumption: (any ConsumptionSending)?
    /// The app's App Store Server API client, when it has a key (`notifications backfill` reads its history).
    public let api: AppStoreServerAPIClient?
    /// The app's circuit breakers (one per Apple call), for metrics.
    public let breakers: CircuitBreakers?
    /// The app's rate governor, whose share of Apple's limit follows the partitions this replica owns.
    public let governor: RateGovernor?

    public init(
        name: String, bundleID: String, isDefault: Bool, purchases: any PurchaseVerifying,
        signedData: SignedDataVerifier, consumption: (any ConsumptionSending)?, api: AppStoreServerAPIClient? = nil,
        breakers: CircuitBreakers? = nil, governor: RateGovernor? = nil
    ) {
        self.name = name
        self.bundleID = bundleID
        scope = isDefault ? .defaultApp : AppScope(bundleID)
        self.purchases = purchases
        self.signedData = signedData
        self.consumption = consumption
        self.api = api
        self.breakers = breakers
        self.governor = governor
    }
}

/// The apps of the configuration, by bundle id: the default app (`apple.*`) and each `apps.NAME`
/// (docs/contract.md section 10). Bundle ids are compared byte for byte, as Apple's answers are.
public struct AppleApps: Sendable {
    /// The default app first.
    public let all: [AppleApp]
    private let byBundleID: [[UInt8]: AppleApp]

    public init(_ apps: [AppleApp]) {
        precondition(!apps.isEmpty, "the default app is always configured")
        all = apps
        byBundleID = Dictionary(apps.map { (Array($0.bundleID.utf8), $0) }) { first, _ in first }
    }

    public var defaultApp: AppleApp { all[0] }

    /// The checker of the certificates' revocation every app's verifier shares (nil: not checked).
    public var revocation: RevocationChecker? { defaultApp.signedData.configuration.revocation }

    /// The app a job names: its `bundle_id`, or the default app when it names none; nil for a bundle id no
    /// app has.
    public func app(bundleID: String?) -> AppleApp? {
        guard let bundleID else { return defaultApp }
        return byBundleID[Array(bundleID.utf8)]
    }

    /// The app a signed notification is for, by the bundle id its payload names, read before verification
    /// to choose the verifier; that verifier then checks the bundle id with the signature. With one app
    /// there is nothing to choose.
    package func app(forNotification jws: String) -> AppleApp? {
        guard all.count > 1 else { return defaultApp }
        guard let bundleID = Self.unverifiedBundleID(jws) else { return nil }
        return byBundleID[Array(bundleID.utf8)]
    }

    /// `bundleId` of a JWS's payload (in `data`, `summary`, `externalPurchaseToken` or `appData`), unverified.
    package static func unverifiedBundleID(_ jws: String) -> String? {
        let parts = jws.split(separator: ".", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decodeBytes(parts[1]),
            let members = JSONObjectScanner.members(payload)
        else { return nil }
        for member in members where NotificationPayload.appFields.contains(member.key) {
            guard let inner = JSONObjectScanner.members(member.raw),
                let bundle = inner.first(where: { $0.key == "bundleId" })
            else { continue }
            return JSONStringToken.text(bundle.raw)
        }
        return nil
    }
}
