package import Crypto
package import Foundation
import Observability

/// An error from verifying something with Apple.
///
/// `isRetriable` says a later attempt may succeed (Apple unavailable, rate limited, a timeout); the retry
/// policy reads it. A non-retriable error is Apple's final word, or ours, on this input. `reason` is for
/// people and never holds a receipt, a token, a key or a shared secret.
public struct AppleVerificationError: Error, Sendable, CustomStringConvertible {
    /// Open set of codes.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        // Signed data (JWS) verification, after Apple's VerificationStatus.
        public static let invalidSignature = Code("invalid_signature")
        public static let invalidChainLength = Code("invalid_chain_length")
        public static let invalidCertificate = Code("invalid_certificate")
        public static let invalidChain = Code("invalid_chain")
        public static let malformed = Code("malformed")
        public static let bundleMismatch = Code("bundle_mismatch")
        public static let environmentNotAllowed = Code("environment_not_allowed")
        /// A signed transaction of its own (not a notification's) that names no environment: signed before Apple
        /// added the field, so it does not say whether it is Production's or Sandbox's.
        public static let environmentMissing = Code("environment_missing")
        public static let invalidKey = Code("invalid_key")
        /// The chain's revocation status (OCSP) is not known yet: being asked, or an answer that did not settle it
        /// (a certificate the responder does not know, an answer that does not verify). Retriable.
        public static let revocationUnknown = Code("revocation_unknown")
        /// The chain's OCSP responders gave no answer at all (not reached, timed out): retriable, and a caller may
        /// wait for them without limit, as for any service that does not answer.
        public static let revocationUnanswered = Code("revocation_unanswered")
        // Calls to Apple.
        public static let transport = Code("transport")
        public static let timeout = Code("timeout")
        public static let httpStatus = Code("http_status")
        public static let rateLimited = Code("rate_limited")
        public static let appleStatus = Code("apple_status")
        public static let apiError = Code("api_error")
        public static let unauthorized = Code("unauthorized")
        public static let notFound = Code("not_found")
        /// verifyReceipt status 21002 for a receipt not known to be Apple's: malformed, or Apple's temporary
        /// issue. Retried a bounded number of times (`apple.verify_receipt.status_21002_calls`), then a deny.
        public static let possiblyMalformed = Code("possibly_malformed")
    }

    public let code: Code
    public let reason: String
    public let isRetriable: Bool
    /// When Apple said to come back (`Retry-After`), as a wait from when the answer came: never negative,
    /// and never longer than the client's `maximumRetryAfter`, whatever the header held.
    public let retryDelay: Duration?

    /// ``retryDelay`` in seconds, for callers that count in seconds. Always finite.
    public var retryAfter: Double? {
        retryDelay?.inSeconds
    }

    /// Whether the chain's revocation status is not known yet (``Code/revocationUnknown``,
    /// ``Code/revocationUnanswered``): the data may verify once it is.
    public var isRevocationPending: Bool { code == .revocationUnknown || code == .revocationUnanswered }

    public init(_ code: Code, _ reason: String, isRetriable: Bool = false, retryAfter: Duration? = nil) {
        self.code = code
        self.reason = reason
        self.isRetriable = isRetriable
        self.retryDelay = retryAfter
    }

    public var description: String { "\(code): \(reason)" }
}

extension AppleVerificationError {
    /// A certificate read from `bytes` (DER or PEM), or `invalid_certificate`.
    package static func certificate(_ bytes: Data) throws(AppleVerificationError) -> X509Certificate {
        do { return try X509Certificate(bytes: bytes) } catch {
            throw AppleVerificationError(.invalidCertificate, error.reason)
        }
    }

    /// The same error, as Apple's verification names it: a key's `invalid_key`, a certificate's or a path's
    /// `invalid_certificate` and `invalid_chain`.
    package init(_ error: CryptoError) {
        switch error.kind {
        case .certificate: self.init(.invalidCertificate, error.reason)
        case .key: self.init(.invalidKey, error.reason)
        case .path: self.init(.invalidChain, error.reason)
        }
    }
}
