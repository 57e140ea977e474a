/* verify.h: --verify, the prediction beside the lessons' own figures. */
#ifndef PLAN_VERIFY_H
#define PLAN_VERIFY_H

void verify_keep_env(void); /* before MPI_Init: the launcher's variables are not a child's */
int verify(const char *self, int quick, const char *only); /* the shapes that failed */

#endif
