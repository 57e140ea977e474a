/* train_internal.h: what the files of the training layer (common/train/)
 * share with each other, not with the lessons. */
#ifndef DT_TRAIN_INTERNAL_H
#define DT_TRAIN_INTERNAL_H

#include "comm_internal.h"
#include "train.h"

#endif
