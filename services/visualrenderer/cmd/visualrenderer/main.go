// Command visualrenderer runs the visual renderer: the stats API over the
// rollups, charts (SVG, PNG) and dashboards (default port 8086).
package main

import "threatview/platform/cli"

func main() { cli.Main("visualrenderer", run) }
