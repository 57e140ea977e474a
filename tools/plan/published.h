/* published.h: --verify-published, the planner against published runs. */
#ifndef PLAN_PUBLISHED_H
#define PLAN_PUBLISHED_H

/* every run of the file planned beside its published figure; 0: all
 * expressed and at least 80% within 25% */
int verify_published(const char *self, const char *path);

#endif
