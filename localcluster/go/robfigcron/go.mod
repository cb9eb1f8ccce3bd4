module k8s-operators-py/localcluster/go/robfigcron

go 1.26.8

require github.com/robfig/cron/v3 v3.0.1
