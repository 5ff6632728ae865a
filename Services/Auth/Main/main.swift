import AuthService

await AuthCommand.main()
