package import COpenSSL
import Foundation

/// A certificate path OpenSSL validated: from a leaf, through intermediates given alongside it, to one of the
/// trusted roots, each certificate valid at the time asked. OpenSSL's strict mode stays off, as in Apple's
/// libraries (Apple's own test root fails it). What the path must also hold (an issuer's OIDs, its length) is the
/// caller's policy.
package struct CertificatePath: Sendable {
    /// Leaf first, the root it reached last.
    package let certificates: [X509Certificate]
    /// The window in which every certificate of the path is valid, in seconds since the epoch.
    package let validity: ClosedRange<Double>

    /// Validates `leaf` at `time` (nil: validity dates are not checked, for old receipts whose intermediates have
    /// since expired). Throws why not, in OpenSSL's words.
    package init(
        leaf: X509Certificate, intermediates: [X509Certificate], roots: [X509Certificate], at time: time_t?
    ) throws(CryptoError) {
        guard let store = X509_STORE_new(), let context = X509_STORE_CTX_new(), let untrusted = OPENSSL_sk_new_null()
        else { throw CryptoError(.path, "out of memory") }
        defer {
            OPENSSL_sk_free(untrusted)
            X509_STORE_CTX_free(context)
            X509_STORE_free(store)
        }
        for root in roots { X509_STORE_add_cert(store, root.pointer) }
        for intermediate in intermediates { OPENSSL_sk_push(untrusted, UnsafeRawPointer(intermediate.pointer)) }
        guard X509_STORE_CTX_init(context, store, leaf.pointer, untrusted) == 1 else {
            ERR_clear_error()
            throw CryptoError(.path, "could not set up chain verification")
        }
        if let time {
            X509_STORE_CTX_set_time(context, 0, time)
        } else {
            X509_STORE_CTX_set_flags(context, UInt(X509_V_FLAG_NO_CHECK_TIME))
        }
        guard X509_verify_cert(context) == 1 else {
            let reason = String(cString: X509_verify_cert_error_string(Int(X509_STORE_CTX_get_error(context))))
            ERR_clear_error()
            throw CryptoError(.path, reason)
        }
        var certificates: [X509Certificate] = []
        var window: ClosedRange<Double> = -Double.infinity...Double.infinity
        let path = X509_STORE_CTX_get0_chain(context)
        for index in 0..<max(0, OPENSSL_sk_num(path)) {
            guard let raw = OPENSSL_sk_value(path, index) else { continue }
            let certificate = OpaquePointer(raw)
            certificates.append(X509Certificate(sharing: certificate))
            guard let before = X509Certificate.seconds(X509_get0_notBefore(certificate)),
                let after = X509Certificate.seconds(X509_get0_notAfter(certificate))
            else { continue }
            let lower = max(window.lowerBound, before)
            let upper = min(window.upperBound, after)
            guard lower <= upper else { throw CryptoError(.path, "certificate validity windows do not overlap") }
            window = lower...upper
        }
        self.certificates = certificates
        self.validity = window
    }
}
