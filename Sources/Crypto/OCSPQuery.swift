import COpenSSL
package import Foundation

/// One certificate's revocation status, asked of the OCSP responder the certificate names (RFC 6960), with
/// OpenSSL: the request to POST, and the answer read only once it verifies (signed by the certificate's issuer,
/// or by a responder the issuer delegated to, chaining to a configured root; about this very certificate;
/// current). The certificate id is never changed after it is made; OpenSSL reads it only.
package final class OCSPQuery: Sendable {
    /// What a verified answer says.
    package enum Answer: Equatable, Sendable {
        /// Not revoked; ask again by `nextUpdate` (nil: the responder names no time).
        case good(nextUpdate: Date?)
        case revoked
        /// The responder does not know the certificate: not one its issuer made.
        case unknown
        /// No answer to act on (not an OCSP response, an error status, a signature or signer that does not
        /// verify, another certificate's status, a stale one): why, for people.
        case untrusted(String)
    }

    /// The responder's URL (the certificate's Authority Information Access, `OCSP - URI`).
    package let url: String
    /// The DER of the request, for `POST` with `Content-Type: application/ocsp-request`.
    package let request: Data
    private let certificateID: OpenSSLObject

    /// Nil when the certificate names no responder by an http or https URL: nothing to ask.
    package init?(certificate: X509Certificate, issuer: X509Certificate) {
        guard let urls = X509_get1_ocsp(certificate.pointer) else { return nil }
        defer { X509_email_free(urls) }
        guard OPENSSL_sk_num(urls) > 0, let first = OPENSSL_sk_value(urls, 0) else { return nil }
        let url = String(cString: first.assumingMemoryBound(to: CChar.self))
        // A URL from a certificate that chained to a configured root, but still only a plain http(s) URL.
        guard url.hasPrefix("http://") || url.hasPrefix("https://"), url.utf8.count <= 512,
            url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        guard let made = OCSP_cert_to_id(EVP_sha1(), certificate.pointer, issuer.pointer) else {
            ERR_clear_error()
            return nil
        }
        let certificateID = OpenSSLObject(adopting: made, free: { OCSP_CERTID_free($0) })  // freed on every return
        guard let request = OCSP_REQUEST_new() else { return nil }
        defer { OCSP_REQUEST_free(request) }
        guard let copy = OCSP_CERTID_dup(made) else { return nil }
        guard OCSP_request_add0_id(request, copy) != nil else {
            OCSP_CERTID_free(copy)
            return nil
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_OCSP_REQUEST(request, &out)
        guard length > 0, let out else { return nil }
        self.request = Data(bytes: out, count: Int(length))
        CRYPTO_free(out, nil, 0)
        self.url = url
        self.certificateID = certificateID
    }

    /// The responder's answer `body`, verified: its signer chains to one of `roots` (with `issuer` as an
    /// intermediate) and is the issuer or a responder the issuer authorised; about this certificate; current at
    /// now (5 minutes of clock skew allowed; without a next update, at most a day old).
    package func answer(_ body: Data, issuer: X509Certificate, roots: [X509Certificate]) -> Answer {
        let response = body.withUnsafeBytes { raw -> OpaquePointer? in
            var cursor = raw.bindMemory(to: UInt8.self).baseAddress
            return d2i_OCSP_RESPONSE(nil, &cursor, raw.count)
        }
        guard let response else {
            ERR_clear_error()
            return .untrusted("the answer is not an OCSP response")
        }
        defer { OCSP_RESPONSE_free(response) }
        let status = OCSP_response_status(response)
        guard status == OCSP_RESPONSE_STATUS_SUCCESSFUL else {
            return .untrusted("the responder answered status \(status)")
        }
        guard let basic = OCSP_response_get1_basic(response) else {
            ERR_clear_error()
            return .untrusted("the OCSP response has no basic response")
        }
        defer { OCSP_BASICRESP_free(basic) }
        guard let store = X509_STORE_new(), let intermediates = OPENSSL_sk_new_null() else {
            return .untrusted("out of memory")
        }
        defer {
            OPENSSL_sk_free(intermediates)
            X509_STORE_free(store)
        }
        for root in roots { X509_STORE_add_cert(store, root.pointer) }
        OPENSSL_sk_push(intermediates, UnsafeRawPointer(issuer.pointer))
        guard OCSP_basic_verify(basic, intermediates, store, 0) == 1 else {
            ERR_clear_error()
            return .untrusted("the response's signature or its signer does not verify")
        }
        var certificateStatus: Int32 = -1
        var reason: Int32 = -1
        var revokedAt: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        var thisUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        var nextUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        guard
            OCSP_resp_find_status(
                basic, certificateID.pointer, &certificateStatus, &reason, &revokedAt, &thisUpdate, &nextUpdate) == 1
        else { return .untrusted("the response is not about this certificate") }
        // 5 minutes of clock skew; an answer without a next update at most a day old (an old "good" replayed
        // by someone on the plain-HTTP path is refused).
        guard OCSP_check_validity(thisUpdate, nextUpdate, 300, nextUpdate == nil ? 86_400 : -1) == 1 else {
            ERR_clear_error()
            return .untrusted("the response is not current")
        }
        switch certificateStatus {
        case V_OCSP_CERTSTATUS_GOOD:
            let next = X509Certificate.seconds(UnsafePointer(nextUpdate)).map { Date(timeIntervalSince1970: $0) }
            return .good(nextUpdate: next)
        case V_OCSP_CERTSTATUS_REVOKED:
            return .revoked
        default:
            return .unknown
        }
    }
}
