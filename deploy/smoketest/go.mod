module threatview/smoketest

go 1.26.8
