/// What a purchase was worth and how it was bought, as Apple's signed transaction says it: what every event about
/// the purchase carries (docs/contract.md, "What a purchase was worth"), so revenue and refunds total from the
/// events alone. Every field is nil where the proof has none: verifyReceipt entries carry no price.
public struct PurchaseValue: Sendable, Hashable {
    /// `price`: in milliunits of `currency` (990 is 0.99), for the quantity bought; Apple's value, passed on.
    public var price: Int64?
    /// `currency`: ISO 4217, three letters.
    public var currency: String?
    /// `storefront`: ISO 3166-1 alpha-3, the customer's App Store country.
    public var storefront: String?
    /// `transactionReason`: `PURCHASE` (the customer bought it) or `RENEWAL` (an automatic renewal).
    public var transactionReason: String?
    /// `inAppOwnershipType`: `PURCHASED`, or `FAMILY_SHARED` (a family member's access: no money changed hands).
    public var ownershipType: InAppOwnershipType?
    /// `offerType`: 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    public var offerType: Int?
    /// `offerIdentifier`: the promotional offer's or offer code's reference name.
    public var offerIdentifier: String?
    /// `offerDiscountType`: `FREE_TRIAL`, `PAY_AS_YOU_GO`, `PAY_UP_FRONT`, `ONE_TIME`.
    public var offerDiscountType: String?
    /// `offerPeriod`: the offer's duration, ISO 8601 (`P1M`).
    public var offerPeriod: String?
    /// `billingPlanType`: `MONTHLY` (one instalment of a commitment: `price` is the month's), `BILLED_UPFRONT`.
    public var billingPlanType: String?
    /// `commitmentInfo`: the commitment a monthly instalment belongs to.
    public var commitment: TransactionCommitmentInfo?

    public init(
        price: Int64? = nil, currency: String? = nil, storefront: String? = nil, transactionReason: String? = nil,
        ownershipType: InAppOwnershipType? = nil, offerType: Int? = nil, offerIdentifier: String? = nil,
        offerDiscountType: String? = nil, offerPeriod: String? = nil
    ) {
        self.price = price
        self.currency = currency
        self.storefront = storefront
        self.transactionReason = transactionReason
        self.ownershipType = ownershipType
        self.offerType = offerType
        self.offerIdentifier = offerIdentifier
        self.offerDiscountType = offerDiscountType
        self.offerPeriod = offerPeriod
    }

    public init(_ transaction: JWSTransaction) {
        self.init(
            price: transaction.price, currency: transaction.currency, storefront: transaction.storefront,
            transactionReason: transaction.transactionReason, ownershipType: transaction.inAppOwnershipType,
            offerType: transaction.offerType, offerIdentifier: transaction.offerIdentifier,
            offerDiscountType: transaction.offerDiscountType, offerPeriod: transaction.offerPeriod)
        billingPlanType = transaction.billingPlanType
        commitment = transaction.commitmentInfo
    }
}
