import SubscriptionService

await SubscriptionCommand.main()
