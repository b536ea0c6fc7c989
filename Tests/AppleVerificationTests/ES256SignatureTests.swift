@testable import AppleVerification
import Crypto
import Foundation
import Testing

@Suite("ES256 signatures")
struct ES256SignatureTests {
    @Test("a signature verifies with its key and not once a bit of the message or the signature changes")
    func verification() throws {
        let key = try ECPrivateKey(pem: try Fixtures.text("chain/testLeaf.key"))
        let message = Array("header.payload".utf8)
        let signature = try key.signES256(message)
        let publicKey = try key.publicKey()
        #expect(message.withUnsafeBytes { publicKey.verifyES256(signature: signature, message: $0) })
        var tampered = message
        tampered[0] ^= 1
        #expect(!tampered.withUnsafeBytes { publicKey.verifyES256(signature: signature, message: $0) })
        var badSignature = signature
        badSignature[40] ^= 1
        #expect(!message.withUnsafeBytes { publicKey.verifyES256(signature: badSignature, message: $0) })
        #expect(!message.withUnsafeBytes { publicKey.verifyES256(signature: signature.prefix(63), message: $0) })
    }
}
