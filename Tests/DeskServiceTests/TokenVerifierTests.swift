import AppleVerification
import Crypto
@testable import DeskService
import Foundation
import Testing

/// The desk verifies the studio's tokens itself: what it accepts, and each forgery and mistake it refuses.
@Suite("Sign-in tokens: verified as an OpenID Connect relying party must")
struct TokenVerifierTests {
    static let issuer = "https://sso.studio.test"
    static let now = Date(timeIntervalSince1970: 1_800_000_600)

    /// Apple's test key (P-256) as the provider's ES256 key `ec-1`.
    static let ecKey: ECPrivateKey = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("AppleClientTests/testSigningKey.p8")
        return try! ECPrivateKey(pem: String(contentsOf: url, encoding: .utf8))
    }()
    static let ecPublic = SigningKey(
        p256X: Base64URL.decodeBytes("rPJyxEu2_oKCrJaaTVTrq39DKJ2XcN6W-k8UvGf-Y_k")!,
        y: Base64URL.decodeBytes("Q1jWxYrUKHGm7A1L0jdHnRx91Cj-UD08-HDpciDzK10")!)!

    /// An RSA key and a token it signed (made once with joserfc): iss sso.studio.test, aud support-desk, sub
    /// agent-17, groups [support-agent], iat 1800000000, exp 1800003600.
    static let rsaPublic = SigningKey(
        rsaModulus: Base64URL.decodeBytes(
            "3bDygHdHMb9tDvL97MIGs20mcjjKuXx2Tn1LNXKja8rKEEaCEHUwkbzWWAxybl1bLycD32ZyJL9l2IeVvoxDKtG09ufvVGymbZmdy2Qb5OUHOvPp22zFicXHyPmJTA1bx8fPlY4O3BInI4BeNBJmmc1U_n0mlSVU4yQrmgmnxeAGOxeArdXnylFX7Co73RbfFx5KDnFn9uQqjnlXcbwSO_NpQxuyZnKcxONbiGYBn4DcGabhuPRw2PXhpo3A-0y9jKpYLzF7ml2khu_zL59EP5m1x-nVNcWVeDx-wces5VIrzml9k8nR4Zp9AZ13qy2Pc9yTjSMSYN7Xwjqu3HtyAw"
        )!, exponent: [1, 0, 1])!
    static let rsaToken =
        "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiIsImtpZCI6InJzYS1maXh0dXJlIn0.eyJpc3MiOiJodHRwczovL3Nzby5zdHVkaW8udGVzdCIsImF1ZCI6InN1cHBvcnQtZGVzayIsInN1YiI6ImFnZW50LTE3IiwiZW1haWwiOiJhbmFAc3R1ZGlvLnRlc3QiLCJncm91cHMiOlsic3VwcG9ydC1hZ2VudCJdLCJpYXQiOjE4MDAwMDAwMDAsImV4cCI6MTgwMDAwMzYwMH0.Hw18fMl5fxYg1lb6XiPxBxyFWFkNd1a2uRW2ZE56r0oDCo80dWGsTM6z1SQhkxgmSGxO7qOgLuliOeCFQ085XErnTqPSb0VLz4_ZwwXketjpFu-Ocl47ZjcMvnXvtdCwbaaKep1vcdbRdAnBXqHATsPhfVOG0Rr31M4NvvmvsqtQOlAnYJn5OYYI8sn-qJUYuE1EY_1a9dX4DgrjceBHpPCNmycDT6BGndA4om1kpZUY06fXOLcQdCm5Rflh29UBf8XwqaLPWv4qWqN8ZlFEnHUtZO3SkpDLt4PabCZ_Hvgh3rNZJeLdk69I52-WSccUxqKifs8ch2kGgB5M3V66Iw"

    let verifier = TokenVerifier(
        issuer: issuer, audience: "support-desk", clockSkew: 60, claims: DeskClaims(),
        authorizedParties: ["support-desk", "grant-tools"])

    static func keys(_ kid: String) -> SigningKey? {
        ["ec-1": ecPublic, "rsa-fixture": rsaPublic][kid]
    }

    /// An ES256 token signed by `ec-1` (or the header asked for), with claims over the defaults.
    static func token(header: [String: Any] = [:], _ changes: [String: Any?] = [:]) throws -> String {
        var claims: [String: Any] = [
            "iss": issuer, "aud": "support-desk", "sub": "agent-17", "email": "ana@studio.test",
            "groups": ["support-agent"], "iat": 1_800_000_000, "exp": 1_800_003_600,
        ]
        for (name, value) in changes { claims[name] = value }
        let head = ["alg": "ES256", "kid": "ec-1"].merging(header.compactMapValues { $0 as? String }) { $1 }
        let signingInput =
            Base64URL.encode(try JSONSerialization.data(withJSONObject: head)) + "."
            + Base64URL.encode(try JSONSerialization.data(withJSONObject: claims))
        let signature = try ecKey.signES256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    func verify(_ token: String, nonce: String? = nil, at now: Date = Self.now) async throws -> VerifiedToken {
        try await verifier.verify(token, now: now, nonce: nonce) { Self.keys($0) }
    }

    func refusal(_ token: String, nonce: String? = nil, at now: Date = Self.now) async -> TokenRefusal.Reason? {
        do {
            _ = try await verify(token, nonce: nonce, at: now)
            return nil
        } catch let refusal as TokenRefusal {
            return refusal.reason
        } catch {
            Issue.record("unexpected \(error)")
            return nil
        }
    }

    @Test("an ES256 token and an RS256 token of the provider name the agent and their roles")
    func accepted() async throws {
        let es = try await verify(try Self.token())
        #expect(es.subject == "agent-17" && es.name == "ana@studio.test")
        #expect(es.roles == [.agent, .viewer])
        let rs = try await verify(Self.rsaToken)
        #expect(rs.subject == "agent-17" && rs.roles == [.agent, .viewer])
        // An audience list holding the desk's is accepted; a lead is every role.
        let lead = try await verify(try Self.token(["aud": ["other", "support-desk"], "groups": ["support-lead"]]))
        #expect(lead.roles == [.lead, .agent, .viewer])
    }

    @Test("forgeries are refused: another key, a changed payload, none, HMAC, an unknown key, a key of the other kind")
    func forgeries() async throws {
        let good = try Self.token()
        let parts = good.split(separator: ".").map(String.init)
        // The payload changed after signing (a role added).
        let promoted = Base64URL.encode(
            try JSONSerialization.data(withJSONObject: [
                "iss": Self.issuer, "aud": "support-desk", "sub": "agent-17", "groups": ["support-lead"],
                "exp": 1_800_003_600,
            ]))
        #expect(await refusal(parts[0] + "." + promoted + "." + parts[2]) == .signature)
        let rsParts = Self.rsaToken.split(separator: ".").map(String.init)
        #expect(await refusal(rsParts[0] + "." + promoted + "." + rsParts[2]) == .signature)
        // alg none, with or without a signature; HS256 keyed with anything.
        for alg in ["none", "HS256", "RS512", "ES384"] {
            let header = Base64URL.encode(Data("{\"alg\":\"\(alg)\",\"kid\":\"ec-1\"}".utf8))
            #expect(await refusal(header + "." + parts[1] + "." + parts[2]) == .algorithm)
            #expect(await refusal(header + "." + parts[1] + ".") == .algorithm)
        }
        // A key id the provider does not publish; none at all.
        #expect(await refusal(try Self.token(header: ["kid": "stolen"])) == .unknownKey)
        let noKid = Base64URL.encode(Data("{\"alg\":\"ES256\"}".utf8))
        #expect(await refusal(noKid + "." + parts[1] + "." + parts[2]) == .unknownKey)
        // An RS256 header on the EC key's id: the key decides the algorithm, not the header.
        let confused = Base64URL.encode(Data("{\"alg\":\"RS256\",\"kid\":\"ec-1\"}".utf8))
        #expect(await refusal(confused + "." + parts[1] + "." + parts[2]) == .algorithm)
        // Critical extensions, garbage, and a token too large to read.
        #expect(await refusal(try Self.token(header: ["crit": "exp"])) == .malformed)
        for garbage in ["", "a.b", "a.b.c.d", "!!.!!.!!", String(repeating: "A", count: 20_000)] {
            #expect(await refusal(garbage) == .malformed)
        }
    }

    @Test("claims: another issuer, another audience, expired beyond the skew, not valid yet, no subject, a nonce")
    func claims() async throws {
        #expect(await refusal(try Self.token(["iss": "https://sso.studio.test/"])) == .issuer)
        #expect(await refusal(try Self.token(["iss": nil])) == .issuer)
        #expect(await refusal(try Self.token(["aud": "grant-service"])) == .audience)
        #expect(await refusal(try Self.token(["aud": ["grant-service"]])) == .audience)
        // Expired 30 s ago: within the 60 s skew; 90 s ago: refused.
        #expect(await refusal(try Self.token(["exp": 1_800_000_570])) == nil)
        #expect(await refusal(try Self.token(["exp": 1_800_000_510])) == .expired)
        #expect(await refusal(try Self.token(["exp": nil])) == .malformed)
        #expect(await refusal(try Self.token(["exp": "tomorrow"])) == .malformed)
        #expect(await refusal(try Self.token(["exp": 1e300])) == .malformed)
        #expect(await refusal(try Self.token(["nbf": 1_800_000_700])) == .notYetValid)
        #expect(await refusal(try Self.token(["iat": 1_800_001_000])) == .notYetValid)
        #expect(await refusal(try Self.token(["sub": nil])) == .subject)
        #expect(await refusal(try Self.token(["sub": "a\u{0}b"])) == .subject)
        #expect(await refusal(try Self.token(["sub": 17])) == .subject)
        // The sign-in's nonce must be the one the desk sent.
        #expect(await refusal(try Self.token(["nonce": "n-1"]), nonce: "n-1") == nil)
        #expect(await refusal(try Self.token(["nonce": "n-2"]), nonce: "n-1") == .nonce)
        #expect(await refusal(try Self.token(), nonce: "n-1") == .nonce)
    }

    @Test("azp: a client of the desk's when the token names one; an ID token for several audiences must name it")
    func authorizedParty() async throws {
        #expect(await refusal(try Self.token(["azp": "support-desk"])) == nil)
        #expect(await refusal(try Self.token(["azp": "grant-tools"])) == nil)
        #expect(await refusal(try Self.token(["azp": "someone-elses-app"])) == .authorizedParty)
        #expect(await refusal(try Self.token(["azp": 17])) == .authorizedParty)
        #expect(await refusal(try Self.token(["azp": ""])) == .authorizedParty)
        let several: [String: Any?] = ["aud": ["support-desk", "billing"], "nonce": "n-1"]
        #expect(await refusal(try Self.token(several), nonce: "n-1") == .authorizedParty)
        #expect(await refusal(try Self.token(several.merging(["azp": "support-desk"]) { $1 }), nonce: "n-1") == nil)
        // An API token for several APIs need not name its client; without azp and one audience: as before.
        #expect(await refusal(try Self.token(["aud": ["support-desk", "billing"]])) == nil)
        #expect(await refusal(try Self.token(["aud": ["support-desk"]])) == nil)
    }

    @Test("roles come from the configured claim and values only; a hostile name falls back to the subject")
    func roles() async throws {
        #expect(try await verify(try Self.token(["groups": ["admins", "support-viewer"]])).roles == [.viewer])
        #expect(
            try await verify(try Self.token(["groups": "support-viewer support-agent"])).roles == [.viewer, .agent])
        #expect(try await verify(try Self.token(["groups": nil])).roles.isEmpty)
        #expect(try await verify(try Self.token(["groups": [17, ["support-lead"]]])).roles.isEmpty)
        let renamed = TokenVerifier(
            issuer: Self.issuer, audience: "support-desk", clockSkew: 60,
            claims: DeskClaims(nameClaim: "preferred_username", rolesClaim: "roles", lead: "desk-lead"),
            authorizedParties: ["support-desk"])
        let token = try await renamed.verify(
            try Self.token(["roles": ["desk-lead"], "preferred_username": "lee"]), now: Self.now
        ) { Self.keys($0) }
        #expect(token.roles == [.lead, .agent, .viewer] && token.name == "lee")
        let hostile = try await verify(try Self.token(["email": "ana\u{202E}gnp.exe"]))
        #expect(hostile.name == "agent-17")
    }
}
