import COpenSSL
package import Foundation

/// Signs content into a PKCS#7 signed-data container, the shape of an app receipt: for the App Store
/// simulator and tests, with a test chain (Apple's private keys are Apple's).
package final class PKCS7Signer: Sendable {
    private let key: ECPrivateKey
    private let signer: X509Certificate
    private let intermediates: [X509Certificate]

    /// `certificatesPEM`: the signer's certificate first, then the intermediates to include (a root given
    /// last is left out: the verifier has its own).
    package init(keyPEM: String, certificatesPEM: String) throws(CryptoError) {
        key = try ECPrivateKey(pem: keyPEM)
        var certificates: [X509Certificate] = []
        for block in certificatesPEM.components(separatedBy: "-----BEGIN CERTIFICATE-----").dropFirst() {
            certificates.append(try X509Certificate(bytes: Data(("-----BEGIN CERTIFICATE-----" + block).utf8)))
        }
        guard let first = certificates.first else {
            throw CryptoError(.certificate, "no certificate to sign with")
        }
        signer = first
        intermediates = Array(certificates.dropFirst().prefix(1))
    }

    /// DER of a PKCS#7 signed-data holding `content` (id-data), the signer's and the intermediate's
    /// certificates, one SHA-256 signer.
    package func sign(_ content: [UInt8]) throws(CryptoError) -> Data {
        guard let stack = OPENSSL_sk_new_null() else {
            throw CryptoError(.certificate, "out of memory")
        }
        defer { OPENSSL_sk_free(stack) }
        for certificate in intermediates { OPENSSL_sk_push(stack, UnsafeRawPointer(certificate.pointer)) }
        let signed: UnsafeMutablePointer<PKCS7>? = content.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PKCS7_sign(signer.pointer, key.pointer, stack, bio, Int32(PKCS7_BINARY))
        }
        guard let signed else {
            ERR_clear_error()
            throw CryptoError(.certificate, "PKCS7_sign failed")
        }
        defer { PKCS7_free(signed) }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS7(signed, &out)
        guard length > 0, let out else { throw CryptoError(.certificate, "i2d_PKCS7 failed") }
        defer { CRYPTO_free(out, #file, #line) }
        return Data(bytes: out, count: Int(length))
    }
}
