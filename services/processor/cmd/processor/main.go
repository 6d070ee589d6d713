// Command processor consumes the events queue and stores events, facts and
// rollups in the events DB. See package threatview/processor.
package main

import "threatview/platform/cli"

func main() { cli.Main("processor", run) }
