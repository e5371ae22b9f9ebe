# the imports your design needs


def features(X):
    ...  # X: numpy float32 array (n, SIZE, SIZE, 3), already loaded and resized; return a 2-D array, one row per image


def train(X, y, skin_tone):
    ...  # X: features() of the training images (2-D); fit your scikit-learn estimator or Pipeline on X and y; return it
