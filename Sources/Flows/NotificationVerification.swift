package import AppleVerification
package import Events
public import Foundation
public import Messaging
public import Vocabulary

extension AppleNotification {
    package enum Verification: Sendable {
        case verified(AppleNotification)
        /// Genuine but of an environment this worker does not accept (Sandbox without apple.allow_sandbox).
        case environmentNotAllowed(type: NotificationType)
        /// Not Apple's, not this app's, or not a notification: why.
        case rejected(String)
        /// Not decided yet: the chain's revocation status is not known (its OCSP responder is being asked, did not
        /// answer, or answered without settling it; the error's code says which). Try again: Apple sends it again
        /// after a 503; the workers retry the record.
        case unavailable(AppleVerificationError)
    }

    /// `body`: the HTTP request body Apple sends, `{"signedPayload": "<JWS>"}`.
    /// The verifier is the app's the payload names (`data.bundleId`; section 10 of docs/contract.md), which
    /// then checks that bundle id with the signature.
    package static func verify(body: Data, apps: AppleApps) -> Verification {
        // The job parser's scanner, not JSONDecoder: a third of the receiver's time went to decoding the
        // envelope's few kilobytes; and a key given twice is refused rather than read one of two ways.
        let signed = JSONObjectScanner.members(Array(body))?.filter { $0.key == "signedPayload" }
        guard let signed, signed.count == 1, let jws = JSONStringToken.text(signed[0].raw) else {
            return .rejected("the body is not {\"signedPayload\": \"...\"}")
        }
        guard let verifier = apps.app(forNotification: jws)?.signedData else {
            return .rejected("the notification names a bundle id no configured app has")
        }
        do {
            let payload = try verifier.verifyNotification(jws)
            guard let type = payload.notificationType, isToken(type, maximum: 64) else {
                return .rejected("the notification has no notificationType")
            }
            guard let id = payload.notificationUUID, isToken(id, maximum: 64) else {
                return .rejected("the notification has no usable notificationUUID")
            }
            // The time a revocation applies at and a refund request's deadline count from: required.
            guard payload.signedDate != nil else { return .rejected("the notification has no signedDate") }
            if let subtype = payload.subtype, !isToken(subtype, maximum: 64) {
                return .rejected("the notification's subtype is not a plain name")
            }
            let app = payload.app
            var transaction: JWSTransaction?
            if let signed = payload.data?.signedTransactionInfo {
                let nested = try verifier.verifyTransaction(signed, within: app?.environment)
                guard let nestedID = nested.transactionId, isToken(nestedID, maximum: 64) else {
                    return .rejected("the notification's transaction has no usable transactionId")
                }
                transaction = nested
            }
            var renewalInfo: JWSRenewalInfo?
            if let renewal = payload.data?.signedRenewalInfo {
                renewalInfo = try verifier.verifyRenewalInfo(renewal, within: app?.environment)
            }
            var appTransaction: JWSAppTransaction?
            if let signed = payload.appData?.signedAppTransactionInfo {
                let nested = try verifier.verifyAppTransaction(signed, within: app?.environment)
                guard let appTransactionID = nested.appTransactionId, isToken(appTransactionID, maximum: 64) else {
                    return .rejected("the notification's app transaction has no usable appTransactionId")
                }
                appTransaction = nested
            }
            var verified = AppleNotification(
                payload: payload, transaction: transaction, renewalInfo: renewalInfo, id: id,
                type: NotificationType(rawValue: type), subtype: payload.subtype.map(NotificationSubtype.init),
                environment: app?.environment, bundleID: app?.bundleID ?? "")
            verified.appTransaction = appTransaction
            return .verified(verified)
        } catch {
            if error.isRetriable { return .unavailable(error) }
            if error.code == .environmentNotAllowed {
                return .environmentNotAllowed(
                    type: NotificationType(
                        rawValue: (try? verifier.verifiedPayload(jws, as: NotificationPayload.self))?.notificationType
                            ?? ""
                    ))
            }
            return .rejected(error.reason)
        }
    }

    /// ``verify(body:apps:)``, once more when the notification's chain was not known yet, after the revocation
    /// asks it started ended: the first notification signed by a new chain is decided now.
    package static func verifySettled(body: Data, apps: AppleApps) async -> Verification {
        await settled(apps: apps) { verify(body: body, apps: apps) }
    }

    /// `verify()`, and once more when it was not decided because a chain's revocation status was not known yet,
    /// after the asks it started ended: what a process sees first is decided at once, not after a backoff.
    package static func settled(apps: AppleApps, _ verify: () -> Verification) async -> Verification {
        let verification = verify()
        guard case .unavailable = verification, let revocation = apps.revocation else { return verification }
        await revocation.settled()
        return verify()
    }

    /// Letters, digits, `-`, `_` and `.`, 1 to `maximum` bytes: what Apple's ids and type names are made of;
    /// anything else would end up in headers, keys and metric labels.
    package static func isToken(_ text: String, maximum: Int) -> Bool {
        let bytes = text.utf8
        return (1...maximum).contains(bytes.count)
            && bytes.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D
                    || $0 == 0x5F || $0 == 0x2E
            }
    }
}

/// A notification read back from Apple's history (`notifications backfill`), checked as the receiver checks
/// one, with the record the receiver would have produced.
public enum BackfilledNotification {
    public struct Record: Sendable {
        /// Apple's notificationUUID.
        public let id: String
        public let key: String
        public let type: NotificationType
        public let headers: [MessageHeader]

        init(_ notification: AppleNotification) {
            id = notification.id
            key = notification.key
            type = notification.type
            headers = notification.recordHeaders()
        }
    }

    public enum Verification: Sendable {
        case verified(Record)
        /// Genuine, of an environment not accepted here.
        case skipped
        case rejected(String)
        /// Not decided yet: its certificates' revocation status is not known (the replay stops, to read it again).
        case unavailable(String)
    }

    public static func verify(body: Data, apps: AppleApps) async -> Verification {
        switch await AppleNotification.verifySettled(body: body, apps: apps) {
        case .verified(let notification):
            return .verified(Record(notification))
        case .environmentNotAllowed: return .skipped
        case .rejected(let reason): return .rejected(reason)
        case .unavailable(let error): return .unavailable(error.reason)
        }
    }
}
