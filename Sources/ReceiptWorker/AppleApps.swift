import AppleVerification
import Foundation

/// One app the worker verifies purchases of: its name (in metrics and logs) and its verifier, which holds
/// its bundle id, app id, environment policy, shared secret and API token.
public struct AppleApp: Sendable {
    public let name: String
    public let verifier: AppleVerifier
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
        byBundleID = Dictionary(apps.map { (Array($0.verifier.bundleID.utf8), $0) }) { first, _ in first }
    }

    public var defaultApp: AppleApp { all[0] }

    /// The app a job names: its `bundle_id`, or the default app when it names none; nil for a bundle id no
    /// app has.
    public func app(bundleID: String?) -> AppleApp? {
        guard let bundleID else { return defaultApp }
        return byBundleID[Array(bundleID.utf8)]
    }

    /// The app a signed notification is for, by the bundle id its payload names, read before verification
    /// to choose the verifier; that verifier then checks the bundle id with the signature. With one app
    /// there is nothing to choose.
    func app(forNotification jws: String) -> AppleApp? {
        guard all.count > 1 else { return defaultApp }
        guard let bundleID = Self.unverifiedBundleID(jws) else { return nil }
        return byBundleID[Array(bundleID.utf8)]
    }

    /// `data.bundleId` (or `summary.bundleId`) of a JWS's payload, unverified.
    static func unverifiedBundleID(_ jws: String) -> String? {
        let parts = jws.split(separator: ".", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decodeBytes(parts[1]),
            let members = JSONObjectScanner.members(payload)
        else { return nil }
        for member in members where member.key == "data" || member.key == "summary" {
            guard let inner = JSONObjectScanner.members(member.raw),
                let bundle = inner.first(where: { $0.key == "bundleId" })
            else { continue }
            return JSONObjectScanner.decodeString(bundle.raw)
        }
        return nil
    }
}
