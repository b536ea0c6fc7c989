import COpenSSL
import Foundation
import Synchronization

/// Verifies a JWS `x5c` chain the way Apple's App Store Server Library does: exactly three certificates,
/// Apple's OIDs on the leaf and the intermediate, a path to one of the configured roots, each certificate
/// valid at the effective date. OpenSSL's strict mode stays off, as in Apple's libraries (Apple's own test
/// root fails it). Revocation is not checked online.
///
/// Verified chains are cached by the header that carried them, with the window in which they are valid,
/// so a hit costs a dictionary lookup instead of three DER parses and a path validation.
final class ChainVerifier: Sendable {
    static let leafOID = "1.2.840.113635.100.6.11.1"
    static let intermediateOID = "1.2.840.113635.100.6.2.1"

    private struct Verified {
        let key: ECPublicKey
        let validity: ClosedRange<Double>
    }

    private let roots: [X509Certificate]
    private let cache = Mutex<[Substring: Verified]>([:])  // a Substring key: no copy of the header per lookup
    private let cacheLimit: Int

    init(roots: [X509Certificate], cacheLimit: Int) {
        self.roots = roots
        self.cacheLimit = cacheLimit
    }

    /// The leaf's public key, once the chain in `certificates` (base64 DER, leaf first) is verified at
    /// `date` (seconds since the epoch). `cacheKey` identifies the chain (the JWS header segment).
    func leafKey(cacheKey: Substring, certificates: () throws(AppleVerificationError) -> [String], at date: Double)
        throws(AppleVerificationError) -> ECPublicKey
    {
        if cacheLimit > 0, let hit = cache.withLock({ $0[cacheKey] }) {
            guard hit.validity.contains(date) else {
                throw AppleVerificationError(.invalidChain, "the certificate chain is not valid at the signed date")
            }
            return hit.key
        }
        let verified = try verify(certificates(), at: date)
        guard cacheLimit > 0 else { return verified.key }
        cache.withLock { cache in
            if cache.count >= cacheLimit { cache.removeAll(keepingCapacity: true) }
            cache[cacheKey] = verified
        }
        return verified.key
    }

    private func verify(_ encoded: [String], at date: Double) throws(AppleVerificationError) -> Verified {
        guard encoded.count == 3 else {
            throw AppleVerificationError(.invalidChainLength, "x5c holds \(encoded.count) certificates, not 3")
        }
        var certificates: [X509Certificate] = []
        for text in encoded {
            guard let der = Data(base64Encoded: text) else {
                throw AppleVerificationError(.invalidCertificate, "an x5c certificate is not base64")
            }
            certificates.append(try X509Certificate(bytes: der))
        }
        let leaf = certificates[0]
        let intermediate = certificates[1]
        guard leaf.hasExtension(oid: Self.leafOID) else {
            throw AppleVerificationError(.invalidCertificate, "the leaf certificate lacks Apple's receipt-signing OID")
        }
        guard intermediate.hasExtension(oid: Self.intermediateOID) else {
            throw AppleVerificationError(.invalidCertificate, "the intermediate certificate lacks Apple's WWDR OID")
        }
        let validity = try validatePath(leaf: leaf, intermediate: intermediate, at: date)
        return Verified(key: try leaf.publicKey(), validity: validity)
    }

    /// Path validation with OpenSSL; returns the window in which every certificate of the path is valid.
    private func validatePath(leaf: X509Certificate, intermediate: X509Certificate, at date: Double)
        throws(AppleVerificationError) -> ClosedRange<Double>
    {
        guard let store = X509_STORE_new(), let context = X509_STORE_CTX_new(), let untrusted = OPENSSL_sk_new_null()
        else { throw AppleVerificationError(.invalidChain, "out of memory") }
        defer {
            OPENSSL_sk_free(untrusted)
            X509_STORE_CTX_free(context)
            X509_STORE_free(store)
        }
        for root in roots { X509_STORE_add_cert(store, root.pointer) }
        OPENSSL_sk_push(untrusted, UnsafeRawPointer(intermediate.pointer))
        // `date` comes from the payload, before its signature is checked: a failable conversion, never `time_t(_:)`.
        guard date.isFinite, let time = time_t(exactly: date.rounded(.down)) else {
            throw AppleVerificationError(.invalidChain, "the signed date is not a time a certificate can be checked at")
        }
        guard X509_STORE_CTX_init(context, store, leaf.pointer, untrusted) == 1 else {
            throw AppleVerificationError(.invalidChain, "could not set up chain verification")
        }
        X509_STORE_CTX_set_time(context, 0, time)
        guard X509_verify_cert(context) == 1 else {
            let reason = String(cString: X509_verify_cert_error_string(Int(X509_STORE_CTX_get_error(context))))
            ERR_clear_error()
            throw AppleVerificationError(.invalidChain, "certificate chain rejected: \(reason)")
        }
        var window: ClosedRange<Double> = -Double.infinity...Double.infinity
        let path = X509_STORE_CTX_get0_chain(context)
        for index in 0..<max(0, OPENSSL_sk_num(path)) {
            guard let raw = OPENSSL_sk_value(path, index) else { continue }
            let certificate = OpaquePointer(raw)
            guard let before = X509Certificate.seconds(X509_get0_notBefore(certificate)),
                let after = X509Certificate.seconds(X509_get0_notAfter(certificate))
            else { continue }
            let lower = max(window.lowerBound, before)
            let upper = min(window.upperBound, after)
            guard lower <= upper else {
                throw AppleVerificationError(.invalidChain, "certificate validity windows do not overlap")
            }
            window = lower...upper
        }
        return window
    }
}
