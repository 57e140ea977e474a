/* verify.h: --verify, the prediction beside the lessons' own figures. */
#ifndef PLAN_VERIFY_H
#define PLAN_VERIFY_H

void verify_keep_env(void); /* before MPI_Init: the launcher's variables are not a child's */
int verify(const char *self, int quick, const char *only); /* the shapes that failed */
/* for the tool's other checks (published.c): the environment a child plan
 * or mpirun runs in (MPI_Init's variables dropped), a command's output into
 * a log (its status), and a JSON number ("key": value) in a text, or NAN */
void verify_child_env(void);
int verify_sh(const char *cmd, const char *log);
double verify_json(const char *text, const char *key);

#endif
