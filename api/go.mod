module threatview/api

go 1.26.8
