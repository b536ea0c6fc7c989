package import COpenSSL
package import Foundation

/// Owns one OpenSSL `X509`, never changed after parsing (OpenSSL allows concurrent reads of an `X509`).
package final class X509Certificate: Sendable {
    private let certificate: OpenSSLObject
    package var pointer: OpaquePointer { certificate.pointer }

    /// Parses DER (the whole of `bytes`: nothing may follow the certificate, or one certificate would have as many
    /// encodings as a sender likes), or PEM when the bytes start with "-----BEGIN".
    package init(bytes: Data) throws(CryptoError) {
        let parsed: OpaquePointer? =
            isPEM(bytes)
            ? bytes.withUnsafeBytes { raw in
                guard let length = Int32(exactly: raw.count) else { return nil }
                let bio = BIO_new_mem_buf(raw.baseAddress, length)
                defer { BIO_free(bio) }
                return PEM_read_bio_X509(bio, nil, nil, nil)
            }
            : bytes.withUnsafeBytes { raw in
                guard let start = raw.bindMemory(to: UInt8.self).baseAddress else { return nil }
                var cursor: UnsafePointer<UInt8>? = start
                guard let parsed = d2i_X509(nil, &cursor, raw.count) else { return nil }
                guard cursor == start + raw.count else {
                    X509_free(parsed)
                    return nil
                }
                return parsed
            }
        guard let parsed else {
            ERR_clear_error()
            throw CryptoError(.certificate, "a certificate could not be parsed")
        }
        certificate = OpenSSLObject(adopting: parsed, free: { X509_free($0) })
    }

    /// Shares a certificate another object owns (a container's, a verified path's): one more reference to it.
    init(sharing pointer: OpaquePointer) {
        X509_up_ref(pointer)
        certificate = OpenSSLObject(adopting: pointer, free: { X509_free($0) })
    }

    /// The certificate's DER.
    package var der: Data {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(pointer, &out)
        guard length > 0, let out else { return Data() }
        defer { CRYPTO_free(out, nil, 0) }
        return Data(bytes: out, count: Int(length))
    }

    /// The validity window, as seconds since the epoch.
    package var validity: ClosedRange<Double>? {
        guard let notBefore = Self.seconds(X509_get0_notBefore(pointer)),
            let notAfter = Self.seconds(X509_get0_notAfter(pointer)), notBefore <= notAfter
        else { return nil }
        return notBefore...notAfter
    }

    /// Whether the certificate carries an extension with this OID (present, whatever its value).
    package func hasExtension(oid: String) -> Bool { Self.hasExtension(pointer, oid: oid) }

    /// The same for a certificate owned elsewhere (one of a PKCS#7's or a verified chain's).
    package static func hasExtension(_ certificate: OpaquePointer, oid: String) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else { return false }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(certificate, object, -1) >= 0
    }

    /// The subject public key.
    package func publicKey() throws(CryptoError) -> ECPublicKey {
        guard let key = X509_get_pubkey(pointer) else {
            throw CryptoError(.certificate, "a certificate has no usable public key")
        }
        return ECPublicKey(adopting: key)
    }

    /// An ASN.1 time as seconds since the epoch.
    package static func seconds(_ time: UnsafePointer<ASN1_TIME>?) -> Double? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Double(timegm(&parts))
    }
}
