// The entry point: an unlock agent (`itsme __unlock-agent DIR`, started by
// a command after a correct PIN) is entered here, before any asynchronous
// code or Dispatch thread runs, so that it can fork the commands it runs;
// everything else is the command line.
if CommandLine.arguments.count == 3 && CommandLine.arguments[1] == UnlockAgent.serveArgument {
    UnlockAgent.serve(CommandLine.arguments[2])
}
runCommandLine(Array(CommandLine.arguments.dropFirst()))
