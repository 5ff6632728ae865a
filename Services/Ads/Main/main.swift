import AdsService

await AdsCommand.main()
