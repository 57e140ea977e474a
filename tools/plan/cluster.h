/* cluster.h: the machines a plan is made for: a cluster's datasheet (a
 * preset or the user's file), or this machine as --measure wrote it. */
#ifndef PLAN_CLUSTER_H
#define PLAN_CLUSTER_H

#include "13_plan/inputs.h"

int cluster_preset(const char *name, machine *c); /* 0: no such preset */
void cluster_file(const char *path, machine *c);  /* key = value; dt_fail on error */
void machine_write(const char *path, const machine *c);
int machine_read(const char *path, machine *c); /* 0: no file */

#endif
