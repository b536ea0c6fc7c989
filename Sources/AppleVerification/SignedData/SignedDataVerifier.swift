import Crypto
public import Foundation
public import Vocabulary

/// Verifies StoreKit 2 signed data (JWS) locally, as Apple's App Store Server Library does: ES256 over
/// `header.payload`, the `x5c` chain to the configured roots with Apple's OIDs, validity at `signedDate`;
/// then the bundle id and the environment.
public final class SignedDataVerifier: Sendable {
    public struct Configuration: Sendable {
        /// Trusted roots, DER or PEM. Default in the worker: the bundled Apple Root CA - G3.
        public var rootCertificates: [Data]
        /// The app's bundle id; signed data for another app is refused.
        public var bundleID: String
        /// Environments accepted. Default: Production only.
        public var allowedEnvironments: Set<AppleEnvironment> = [.production]
        /// The app's Apple id, checked on notifications when set.
        public var appAppleID: Int64?
        /// Verified chains kept; 0 verifies every chain every time. Default: 64.
        public var chainCacheSize = 64
        /// Whether Apple revoked a chain's certificates, asked online (OCSP); nil: not asked. One checker may serve
        /// every app's verifier (Apple signs them all with one chain).
        public var revocation: RevocationChecker?

        public init(rootCertificates: [Data], bundleID: String) {
            self.rootCertificates = rootCertificates
            self.bundleID = bundleID
        }
    }

    public let configuration: Configuration
    private let chains: ChainVerifier

    public init(configuration: Configuration) throws(AppleVerificationError) {
        guard !configuration.rootCertificates.isEmpty else {
            throw AppleVerificationError(.invalidCertificate, "no root certificate configured")
        }
        var roots: [X509Certificate] = []
        for bytes in configuration.rootCertificates { roots.append(try AppleVerificationError.certificate(bytes)) }
        self.configuration = configuration
        self.chains = ChainVerifier(
            roots: roots, cacheLimit: max(0, configuration.chainCacheSize), revocation: configuration.revocation)
    }

    /// `verify` run once more, when it met a chain whose revocation status was not known yet, after the asks it
    /// started ended (each within its responders' timeouts): the first data signed by a new chain is answered
    /// now, not retried later. Without a revocation check, or still not known: what `verify` threw.
    public func settling<T>(_ verify: () throws(AppleVerificationError) -> T) async throws(AppleVerificationError)
        -> T
    {
        do {
            return try verify()
        } catch  where error.isRevocationPending {
            guard let revocation = configuration.revocation else { throw error }
            await revocation.settled()
            return try verify()
        }
    }

    /// Certificate chains validated from their certificates since start, cache misses each: Apple's few
    /// chains are validated once; a number that keeps growing is a sender posting chains of its own.
    public var chainValidations: Int { chains.pathValidations }

    /// A signed transaction, verified and decoded, with its bundle id and environment checked.
    /// Throws ``AppleVerificationError`` with `.bundleMismatch` or `.environmentNotAllowed` for those checks, and
    /// `.environmentMissing` for one alone that names no environment (``unplacedTransactionID(_:)``).
    /// `within`: the environment of the notification that carries it (``nested(in:)``), nil for one alone.
    public func verifyTransaction(_ jws: String, within notification: AppleEnvironment? = nil)
        throws(AppleVerificationError) -> JWSTransaction
    {
        let (transaction, chain) = try verified(jws, as: JWSTransaction.self)
        try check(bundleID: transaction.bundleId)
        let environment = try Self.nested(transaction.environment, in: notification)
        guard environment != nil else {
            // Not a refusal of Sandbox: nothing says which environment it is (Apple's library refuses it too).
            throw AppleVerificationError(
                .environmentMissing, "the signed transaction names no environment (signed before Apple added it)")
        }
        try check(environment: environment)
        try chains.checkRevocation(chain)
        return transaction
    }

    /// The id of a signed transaction that names no environment (refused `environmentMissing` by
    /// ``verifyTransaction(_:within:)``), verified but for that: its signature, chain, bundle id and the chain's
    /// revocation, as any. Nil when it has none; one that names an environment is refused (verify it instead).
    public func unplacedTransactionID(_ jws: String) throws(AppleVerificationError) -> String? {
        let (transaction, chain) = try verified(jws, as: JWSTransaction.self)
        try check(bundleID: transaction.bundleId)
        guard transaction.environment == nil else {
            throw AppleVerificationError(.malformed, "the signed transaction names an environment")
        }
        try chains.checkRevocation(chain)
        return transaction.transactionId
    }

    /// Signed renewal info, verified and decoded, with its environment checked (`within` as for a transaction).
    public func verifyRenewalInfo(_ jws: String, within notification: AppleEnvironment? = nil)
        throws(AppleVerificationError) -> JWSRenewalInfo
    {
        let (info, chain) = try verified(jws, as: JWSRenewalInfo.self)
        try check(environment: try Self.nested(info.environment, in: notification))
        try chains.checkRevocation(chain)
        return info
    }

    /// A signed app transaction (a notification's `appData`), verified and decoded, with its bundle id and its
    /// receipt type's environment checked (`within` as for a transaction).
    public func verifyAppTransaction(_ jws: String, within notification: AppleEnvironment? = nil)
        throws(AppleVerificationError) -> JWSAppTransaction
    {
        let (app, chain) = try verified(jws, as: JWSAppTransaction.self)
        try check(bundleID: app.bundleId)
        if let named = app.appAppleId, let expected = configuration.appAppleID, named != expected {
            throw AppleVerificationError(.bundleMismatch, "the app transaction is for another app")
        }
        let own: AppleEnvironment? =
            switch app.receiptType {
            case "Production": .production
            case "Sandbox": .sandbox
            default: nil
            }
        try check(environment: try Self.nested(own, in: notification))
        try chains.checkRevocation(chain)
        return app
    }

    /// The environment of signed data nested in a notification: its own, else the notification's. Renewal info
    /// signed before Apple added the field (and older transactions) says none; the notification around it,
    /// signed by Apple too, does. A nested environment other than the notification's is refused.
    static func nested(_ own: AppleEnvironment?, in notification: AppleEnvironment?) throws(AppleVerificationError)
        -> AppleEnvironment?
    {
        guard let notification else { return own }
        guard let own else { return notification }
        guard own == notification else {
            throw AppleVerificationError(
                .malformed, "signed data of \(own.rawValue) in a notification of \(notification.rawValue)")
        }
        return own
    }

    /// A signed App Store Server Notification, verified and decoded, with its app and environment checked.
    public func verifyNotification(_ jws: String) throws(AppleVerificationError) -> NotificationPayload {
        let (notification, chain) = try verified(jws, as: NotificationPayload.self)
        // `data`, `summary`, `externalPurchaseToken` or `appData`: whichever says which app it is about.
        let app = notification.app
        try check(bundleID: app?.bundleID)
        try check(environment: app?.environment)
        // Apple leaves appAppleId out in Sandbox; in Production it must name this app, as Apple's library
        // checks. One that names another app is refused in any environment.
        let expected = configuration.appAppleID
        if let named = app?.appAppleID, let expected, named != expected {
            throw AppleVerificationError(.bundleMismatch, "the notification is for another app")
        }
        if app?.environment == .production && (expected == nil || app?.appAppleID == nil) {
            throw AppleVerificationError(
                .bundleMismatch,
                expected == nil
                    ? "a Production notification, and apple.app_apple_id is not set"
                    : "a Production notification without appAppleId")
        }
        try chains.checkRevocation(chain)
        return notification
    }

    /// Verifies the signature and the chain, then decodes the payload. No bundle or environment check.
    /// Throws `.malformed` when `signedDate` or another time in the payload is outside 1970...9999: the
    /// signature makes a payload Apple's, not its numbers usable.
    public func verifiedPayload<Payload: SignedPayload>(_ jws: String, as type: Payload.Type)
        throws(AppleVerificationError) -> Payload
    {
        try verified(jws, as: type).payload
    }

    /// ``verifiedPayload(_:as:)`` with the chain that signed it, for the revocation check the public methods make
    /// last: only data signed with the chain's key, for this app, of an environment accepted here, is ever asked
    /// about (a forgery, another app's or a refused environment's data never causes an ask).
    private func verified<Payload: SignedPayload>(_ jws: String, as type: Payload.Type)
        throws(AppleVerificationError) -> (payload: Payload, chain: ChainVerifier.VerifiedChain)
    {
        var jws = jws  // contiguous UTF-8 (a bridged or foreign string is made so), read in place below
        let parts = jws.withUTF8 { Self.segments(of: $0) }
        guard let parts else {
            throw AppleVerificationError(.malformed, "not a compact JWS (header.payload.signature)")
        }
        // Segments by UTF-8 offset, never by Character: a combining mark after a dot would join it.
        let utf8 = jws.utf8
        func at(_ offset: Int) -> String.Index { utf8.index(utf8.startIndex, offsetBy: offset) }
        let headerSegment = jws[..<at(parts.firstDot)]
        guard let payloadBytes = Base64URL.decodeBytes(jws[at(parts.firstDot + 1)..<at(parts.secondDot)]),
            let signature = Base64URL.decode(jws[at(parts.secondDot + 1)...])
        else { throw AppleVerificationError(.malformed, "the JWS is not base64url") }

        // Decoded before the signature is checked only to learn `signedDate`, the date at which the chain
        // must be valid; nothing in it is trusted, or returned, unless the signature verifies.
        let payload = try Payload(payloadJSON: payloadBytes)
        // `signedDate` picks the date the chain is checked at, before anything vouches for it: range-checked
        // here, as every time in the payload is below, so no conversion of it can trap.
        var date = Date().timeIntervalSince1970
        if let signedDate = payload.signedDate {
            guard let seconds = AppleTimestamp.seconds(milliseconds: signedDate) else {
                throw AppleVerificationError(.malformed, "signedDate is not a time from 1970 to 9999")
            }
            date = seconds
        }
        let chain = try chains.chain(
            header: headerSegment,
            certificates: { () throws(AppleVerificationError) -> [String] in
                try Self.certificates(in: headerSegment)
            },
            at: date)
        let valid = jws.withUTF8 { bytes in
            chain.key.verifyES256(
                signature: signature,
                message: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[..<parts.secondDot])))
        }
        guard valid else { throw AppleVerificationError(.invalidSignature, "the JWS signature does not verify") }
        chains.confirm(header: headerSegment, chain)
        for (field, milliseconds) in payload.millisecondTimes {
            if let milliseconds, AppleTimestamp.date(milliseconds: milliseconds) == nil {
                throw AppleVerificationError(.malformed, "\(field) is not a time from 1970 to 9999")
            }
        }
        return (payload, chain)
    }

    /// The offsets of the two dots of `header.payload.signature`, each segment non-empty; nil for anything
    /// else. A plain byte loop: the generic `firstIndex(of:)` on a string's UTF-8 view cost 4 % of the
    /// notification receiver's time on payloads of a few kilobytes.
    static func segments(of bytes: UnsafeBufferPointer<UInt8>) -> (firstDot: Int, secondDot: Int)? {
        var dots = (-1, -1)
        for index in bytes.indices where bytes[index] == UInt8(ascii: ".") {
            if dots.0 < 0 {
                dots.0 = index
            } else if dots.1 < 0 {
                dots.1 = index
            } else {
                return nil
            }
        }
        guard dots.0 > 0, dots.1 > dots.0 + 1, dots.1 < bytes.count - 1 else { return nil }
        return (dots.0, dots.1)
    }

    /// The header's `x5c`, once its `alg` is ES256. Read with the scanner (a header is 2.5 KB; JSONDecoder cost
    /// more than the rest of a forged JWS's refusal), a key given twice refused.
    static func certificates(in headerSegment: Substring) throws(AppleVerificationError) -> [String] {
        guard let bytes = Base64URL.decodeBytes(headerSegment), let members = JSONObjectScanner.members(bytes) else {
            throw AppleVerificationError(.malformed, "the JWS header is not JSON")
        }
        var algorithm: String?
        var x5c: [String]?
        var keys = Set<String>()
        for member in members {
            guard keys.insert(member.key).inserted else {
                throw AppleVerificationError(
                    .malformed, "the JWS header has \(UTF8Text.prefix(member.key, bytes: 64)) twice")
            }
            switch member.key {
            case "alg": algorithm = try JSONField.string(member)
            case "x5c":
                guard let elements = JSONObjectScanner.elements(member.raw) else {
                    throw AppleVerificationError(.malformed, "the JWS header's x5c is not an array")
                }
                guard elements.count == 3 else {
                    throw AppleVerificationError(
                        .invalidChainLength, "x5c holds \(elements.count) certificates, not 3")
                }
                x5c = []
                for element in elements {
                    guard element.first == UInt8(ascii: "\""), let text = JSONStringToken.text(element)
                    else { throw AppleVerificationError(.malformed, "the JWS header's x5c holds a non-string") }
                    x5c?.append(text)
                }
            default: break
            }
        }
        guard algorithm == "ES256" else {
            throw AppleVerificationError(.malformed, "the JWS algorithm is \(algorithm ?? "missing"), not ES256")
        }
        guard let x5c else {
            throw AppleVerificationError(.invalidChainLength, "the JWS header has no x5c")
        }
        return x5c
    }

    /// A payload without a bundle id is refused, as Apple's library refuses it: skipping the check would
    /// accept another app's purchase that merely leaves the field out.
    private func check(bundleID: String?) throws(AppleVerificationError) {
        guard let bundleID else {
            throw AppleVerificationError(.bundleMismatch, "the signed data names no bundle id")
        }
        guard bundleID.utf8.elementsEqual(configuration.bundleID.utf8) else {  // bytes: not canonical equivalence
            throw AppleVerificationError(
                .bundleMismatch, "signed for bundle \(bundleID), not \(configuration.bundleID)")
        }
    }

    private func check(environment: AppleEnvironment?) throws(AppleVerificationError) {
        guard let environment, configuration.allowedEnvironments.contains(environment) else {
            throw AppleVerificationError(
                .environmentNotAllowed, "environment \(environment?.rawValue ?? "missing") is not allowed")
        }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.keyNotFound(_, let context), DecodingError.dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
        default:
            return "invalid JSON"
        }
    }
}

/// A payload Apple signs, with the date its signature was made (milliseconds since the epoch).
public protocol SignedPayload {
    /// Reads the payload from its JSON; throws `.malformed` for what is not JSON or holds a value of the
    /// wrong type (SignedPayloadDecoding.swift).
    init(payloadJSON bytes: [UInt8]) throws(AppleVerificationError)
    var signedDate: Double? { get }
    /// Every time in the payload (milliseconds since the epoch), named by its field, for the verifier to
    /// range-check. Default: `signedDate` alone.
    var millisecondTimes: [(field: String, milliseconds: Double?)] { get }
}

extension SignedPayload {
    public var millisecondTimes: [(field: String, milliseconds: Double?)] { [("signedDate", signedDate)] }
}
