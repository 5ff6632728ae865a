import OfflineService

await OfflineCommand.main()
