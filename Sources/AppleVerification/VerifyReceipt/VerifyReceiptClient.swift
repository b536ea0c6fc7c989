import Foundation
public import HTTPClient
import Observability
import Vocabulary

/// Calls Apple's legacy verifyReceipt endpoint: production first; a sandbox receipt (21007) is asked of
/// the sandbox only when sandbox purchases are allowed.
public final class VerifyReceiptClient: Sendable {
    public struct Configuration: Sendable {
        /// Default: Apple's production endpoint.
        public var productionURL = "https://buy.itunes.apple.com/verifyReceipt"
        /// Default: Apple's sandbox endpoint.
        public var sandboxURL = "https://sandbox.itunes.apple.com/verifyReceipt"
        /// The app-specific shared secret (`password`); needed for auto-renewable subscriptions.
        public var sharedSecret: String?
        /// Whether a sandbox receipt is verified with the sandbox (else it is reported as such). Default: false.
        public var allowSandbox = false
        /// Per request. Default: 10 s.
        public var timeout: Duration = .seconds(10)
        /// The longest wait a `Retry-After` may ask for; a longer one, or a date centuries away, waits this
        /// long. The worker sets it to `retry.max_backoff_ms`. Default: 30 s.
        public var maximumRetryAfter: Duration = .seconds(30)
        /// Told of every call (for metrics).
        public var observer: AppleCallObserver?
        /// The app's circuit breakers, one per call; nil: none.
        public var breakers: CircuitBreakers?
        /// Checks a receipt's PKCS#7 signature locally when Apple answers 21002 ("malformed, or a temporary
        /// issue"): a receipt Apple signed is not malformed, so its 21002 is Apple's bad minute (transient, and
        /// counted by the breaker); any other receipt's 21002 is ``AppleVerificationError/Code/possiblyMalformed``,
        /// which the caller denies after a few calls. Nil: every 21002 is possibly malformed.
        public var receiptSignatures: ReceiptSignatureVerifier?

        public init() {}
    }

    /// Apple's answer on one receipt.
    public enum Answer: Sendable {
        /// Status 0; `environment` is where it was verified ("Production" or "Sandbox").
        case valid(VerifyReceiptResponse, environment: String)
        /// A sandbox receipt while sandbox purchases are not allowed.
        case sandboxNotAllowed
        /// Apple's final rejection, with its status.
        case invalid(status: Int)
    }

    public let configuration: Configuration
    private let http: HTTPClient

    public init(configuration: Configuration, http: HTTPClient) {
        self.configuration = configuration
        self.http = http
    }

    /// Verifies one receipt. `attempts` counts the HTTP calls made, sandbox redirects included. Throws a
    /// retriable ``AppleVerificationError`` for transient failures (timeouts, 5xx, 429, 21005, 21009,
    /// retryable 211xx, 21002 for a receipt Apple signed), for a wrong shared secret (21004), and for 21002
    /// of any other receipt (``AppleVerificationError/Code/possiblyMalformed``): those are never a rejection
    /// here; the caller denies a receipt that stays possibly malformed.
    public func verify(receipt: String, attempts: inout Int) async throws -> Answer {
        var url = configuration.productionURL
        var environment = "Production"
        for _ in 0..<2 {
            attempts += 1
            let call = environment == "Sandbox" ? "verify_receipt_sandbox" : "verify_receipt_production"
            let response = try await post(receipt: receipt, to: url, call: call)
            let status = VerifyReceiptStatus(status: response.status, isRetryable: response.isRetryable)
            // Signed by Apple, checked here only when Apple calls it malformed: then it is Apple's failure.
            let genuine = status == .malformedOrTemporary && isSignedByApple(receipt)
            switch status {
            case .retryable: AppleHTTP.record(configuration.breakers, call, failed: true)
            // Apple's 21002 for a receipt it never signed is what it answers garbage with, failing or not: it counts
            // neither way (else a flood of garbage keeps a breaker from opening during a 21002 incident, or closes
            // it as a half-open trial).
            case .malformedOrTemporary where genuine: AppleHTTP.record(configuration.breakers, call, failed: true)
            case .malformedOrTemporary: AppleHTTP.recordNeither(configuration.breakers, call)
            default: AppleHTTP.record(configuration.breakers, call, failed: false)
            }
            switch status {
            case .valid:
                return .valid(response, environment: response.environment ?? environment)
            case .sandboxReceipt:
                guard configuration.allowSandbox else { return .sandboxNotAllowed }
                (url, environment) = (configuration.sandboxURL, "Sandbox")
            case .productionReceipt:
                (url, environment) = (configuration.productionURL, "Production")
            case .retryable(let status):
                throw AppleVerificationError(
                    .appleStatus, "verifyReceipt status \(status): \(VerifyReceiptStatus.describe(status))",
                    isRetriable: true)
            case .malformedOrTemporary:
                let reason = "verifyReceipt status 21002: \(VerifyReceiptStatus.describe(21002))"
                guard genuine else { throw AppleVerificationError(.possiblyMalformed, reason, isRetriable: true) }
                throw AppleVerificationError(
                    .appleStatus, reason + " (the receipt's signature is Apple's: a temporary issue)", isRetriable: true
                )
            case .sharedSecretMismatch:
                // Retried (and dead-lettered when it lasts), so no genuine purchase is denied while the
                // secret is being rotated or fixed. Apple answered: no breaker opens for it.
                throw AppleVerificationError(
                    .unauthorized,
                    "verifyReceipt status 21004: the shared secret does not match (check apple.shared_secret)",
                    isRetriable: true)
            case .invalid(let status):
                return .invalid(status: status)
            }
        }
        throw AppleVerificationError(
            .appleStatus, "verifyReceipt redirected between environments twice", isRetriable: true)
    }

    private func isSignedByApple(_ receipt: String) -> Bool {
        guard let signatures = configuration.receiptSignatures else { return false }
        if case .verified = signatures.verify(base64: receipt) { return true }
        return false
    }

    /// `{"receipt-data": …, "exclude-old-transactions": false, "password": …}`, written directly: the
    /// receipt is most of the bytes, and JSONSerialization's dictionary walk cost 5 % of the worker's CPU.
    static func requestBody(receipt: String, sharedSecret: String?) -> Data {
        // Written as bytes into one buffer sized once: the receipt's kilobytes are copied once, where a String
        // built first and then turned into Data copied them twice.
        var body = Data(capacity: receipt.utf8.count + (sharedSecret?.utf8.count ?? 0) + 80)
        body.append(contentsOf: #"{"receipt-data":"#.utf8)
        appendQuoted(receipt, to: &body)
        body.append(contentsOf: #","exclude-old-transactions":false"#.utf8)
        if let sharedSecret {
            body.append(contentsOf: #","password":"#.utf8)
            appendQuoted(sharedSecret, to: &body)
        }
        body.append(UInt8(ascii: "}"))
        return body
    }

    /// `text` as a JSON string; base64 (a receipt) needs no escape and is copied as it is.
    private static func appendQuoted(_ text: String, to body: inout Data) {
        var text = text
        text.withUTF8 { bytes in
            if JSONTextScan.firstSpecial(in: bytes, from: 0) == bytes.count {
                body.append(UInt8(ascii: "\""))
                body.append(bytes)
                body.append(UInt8(ascii: "\""))
            } else {
                body.append(contentsOf: JSONString.quote(String(decoding: bytes, as: UTF8.self)).utf8)
            }
        }
    }

    private func post(receipt: String, to url: String, call: String) async throws -> VerifyReceiptResponse {
        let request = HTTPRequest(
            method: .post, url: url, headers: [("Content-Type", "application/json")],
            body: Self.requestBody(receipt: receipt, sharedSecret: configuration.sharedSecret),
            timeout: configuration.timeout)
        let response = try await AppleHTTP.execute(
            request, with: http, endpoint: "verifyReceipt", call: call, observe: configuration.observer,
            breakers: configuration.breakers)
        guard response.status == 200 else {
            let failure = AppleHTTP.statusError(
                response, endpoint: "verifyReceipt", maximumRetryAfter: configuration.maximumRetryAfter)
            AppleHTTP.record(configuration.breakers, call, failed: failure.isRetriable && failure.code != .rateLimited)
            throw failure
        }
        do {
            return try VerifyReceiptResponse(json: Array(response.body))
        } catch {
            AppleHTTP.record(configuration.breakers, call, failed: true)
            // A 200 that is not Apple's JSON is a broken intermediary or a partial answer, not a verdict.
            throw AppleVerificationError(
                .appleStatus, "verifyReceipt answered with an undecodable body: \(SignedDataVerifier.describe(error))",
                isRetriable: true)
        }
    }
}
