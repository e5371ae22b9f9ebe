# the imports your design needs


def features(X):
    ...  # your features: a 2-D numpy array, one row per image of X


def train(X, y, skin_tone):
    ...  # fit your scikit-learn estimator or Pipeline on features(X) and y, and return it
